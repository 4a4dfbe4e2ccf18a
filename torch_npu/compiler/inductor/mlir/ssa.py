"""The text builder every emitter writes through: SSA names, regions, scoped reuse.

Kernels are produced as MLIR text. Values live in SSA names; a value computed inside a
region (a loop body, an `scf.if` branch) is only visible there, so the reuse cache of
loads and index computations is a stack with one level per open region.
"""

import torch


class Val:
    """An SSA value and the torch dtype it represents (compute dtype, see dtypes.py)."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: torch.dtype):
        self.name = name
        self.dtype = dtype

    def __str__(self):
        return self.name

    __repr__ = __str__


class SsaBuilder:
    def __init__(self):
        self._next = 0
        self.prologue: list = []  # function entry: constants, size arguments as index
        self.lines: list = []
        self.indent = 1
        self.scopes: list = [{}]  # scopes[0]: values defined in the prologue
        self._constants: dict = {}

    def fresh(self, stem: str = "t") -> str:
        self._next += 1
        return f"%{stem}{self._next}"

    def emit(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def assign(self, rhs: str, stem: str = "t") -> str:
        name = self.fresh(stem)
        self.emit(f"{name} = {rhs}")
        return name

    def constant(self, literal: str, mlir_type: str) -> str:
        """A function-level constant: defined once in the entry block, usable anywhere."""
        key = (literal, mlir_type)
        name = self._constants.get(key)
        if name is None:
            name = self.fresh("c")
            self._constants[key] = name
            if mlir_type == "i1":
                self.prologue.append(f"  {name} = arith.constant {literal}")
            else:
                self.prologue.append(f"  {name} = arith.constant {literal} : {mlir_type}")
        return name

    def index_constant(self, value: int) -> str:
        return self.constant(str(int(value)), "index")

    # reuse cache, scoped by region
    def lookup(self, key):
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def remember(self, key, value) -> None:
        self.scopes[-1][key] = value

    def forget(self, predicate) -> None:
        for scope in self.scopes:
            for key in [k for k in scope if predicate(k)]:
                del scope[key]

    def push_scope(self) -> None:
        self.scopes.append({})
        self.indent += 1

    def pop_scope(self) -> None:
        self.scopes.pop()
        self.indent -= 1
