// `torch.npu._DeviceGuard(index)`: the device guard compiled npu code runs its body under
// (`with torch.npu._DeviceGuard(0): ...`), as Inductor's CUDA wrapper uses
// `torch.cuda._DeviceGuard`. It sits on every call of every compiled npu graph, so it is
// a C type rather than a Python class: making it, entering and leaving cost three C
// calls and no Python frame, and leaving the device as it is (the usual case: the graph's
// device is already current) touches nothing but the thread's current-device index.
//
// Entering makes `index` the current device and remembers the previous one; leaving
// restores it, also when the body raised. A negative index leaves the current device
// alone (as for CUDA). One object guards one `with` at a time; each `with` makes its own.
#include "torch_npu/csrc/runtime/device.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/python_numbers.h>
#include <torch/extension.h>

namespace torch_npu {
namespace {

struct DeviceGuardObject {
  PyObject_HEAD
  c10::DeviceIndex index;
  c10::DeviceIndex previous;
};

PyTypeObject DeviceGuardType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* make_guard(PyObject* index_arg) {
  HANDLE_TH_ERRORS
  if (!THPUtils_checkLong(index_arg) || PyBool_Check(index_arg)) {
    PyErr_Format(PyExc_TypeError, "_DeviceGuard(index): index must be an int (a negative one leaves the device "
                 "alone), got %s", Py_TYPE(index_arg)->tp_name);
    return nullptr;
  }
  int64_t index = THPUtils_unpackLong(index_arg);
  if (index >= 0) check_device_index(index, "device guard");
  auto* self = PyObject_New(DeviceGuardObject, &DeviceGuardType);
  if (self == nullptr) return nullptr;
  self->index = index < 0 ? c10::DeviceIndex(-1) : static_cast<c10::DeviceIndex>(index);
  self->previous = -1;
  return reinterpret_cast<PyObject*>(self);
  END_HANDLE_TH_ERRORS
}

const char kSignature[] = "_DeviceGuard(index): exactly one argument, the npu device index";

// Calling the type: `torch.npu._DeviceGuard(0)` (vectorcall: no argument tuple).
PyObject* guard_vectorcall(PyObject* /*type*/, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
    PyErr_SetString(PyExc_TypeError, kSignature);
    return nullptr;
  }
  return make_guard(args[0]);
}

PyObject* guard_new(PyTypeObject* /*type*/, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 1 || (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, kSignature);
    return nullptr;
  }
  return make_guard(PyTuple_GET_ITEM(args, 0));
}

PyObject* guard_enter(PyObject* self_obj, PyObject* /*unused*/) {
  HANDLE_TH_ERRORS
  auto* self = reinterpret_cast<DeviceGuardObject*>(self_obj);
  if (self->index >= 0) {
    self->previous = current_device();
    if (self->previous != self->index) set_current_device(self->index);
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* guard_exit(PyObject* self_obj, PyObject* const* /*args*/, Py_ssize_t /*nargs*/) {
  HANDLE_TH_ERRORS
  auto* self = reinterpret_cast<DeviceGuardObject*>(self_obj);
  if (self->previous >= 0 && current_device() != self->previous) set_current_device(self->previous);
  self->previous = -1;
  Py_RETURN_FALSE;
  END_HANDLE_TH_ERRORS
}

PyObject* guard_repr(PyObject* self_obj) {
  auto* self = reinterpret_cast<DeviceGuardObject*>(self_obj);
  return PyUnicode_FromFormat("torch.npu._DeviceGuard(%d)", static_cast<int>(self->index));
}

PyObject* guard_get_idx(PyObject* self_obj, void* /*closure*/) {
  return PyLong_FromLong(reinterpret_cast<DeviceGuardObject*>(self_obj)->index);
}

PyObject* guard_get_prev_idx(PyObject* self_obj, void* /*closure*/) {
  return PyLong_FromLong(reinterpret_cast<DeviceGuardObject*>(self_obj)->previous);
}

PyMethodDef guard_methods[] = {
    {"__enter__", guard_enter, METH_NOARGS, "Makes the guarded device current, remembering the previous one."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&guard_exit)), METH_FASTCALL,
     "Makes the previous device current again."},
    {nullptr, nullptr, 0, nullptr}};

// The attribute names of torch.cuda._DeviceGuard.
PyGetSetDef guard_getset[] = {
    {"idx", guard_get_idx, nullptr, "The guarded device index (-1: none).", nullptr},
    {"prev_idx", guard_get_prev_idx, nullptr, "The device current before entering (-1: not entered).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

void add_device_guard_type(py::module_& m) {
  DeviceGuardType.tp_name = "torch_npu._C._DeviceGuard";
  DeviceGuardType.tp_basicsize = sizeof(DeviceGuardObject);
  DeviceGuardType.tp_flags = Py_TPFLAGS_DEFAULT;
  DeviceGuardType.tp_doc =
      "_DeviceGuard(index)\n--\n\nContext manager making npu device `index` current for its body "
      "(a negative index: none).";
  DeviceGuardType.tp_new = guard_new;
  DeviceGuardType.tp_vectorcall = guard_vectorcall;
  DeviceGuardType.tp_methods = guard_methods;
  DeviceGuardType.tp_getset = guard_getset;
  DeviceGuardType.tp_repr = guard_repr;
  if (PyType_Ready(&DeviceGuardType) < 0) throw py::error_already_set();
  Py_INCREF(&DeviceGuardType);
  m.add_object("_DeviceGuard", py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(&DeviceGuardType)));
}

}  // namespace torch_npu
