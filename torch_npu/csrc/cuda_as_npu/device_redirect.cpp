// The torch-function handler of transfer_to_npu: every torch function call made while its
// mode is active passes through here, so it must cost next to nothing when there is no
// "cuda" device among the arguments (a Python __torch_function__ measured 1.5x the cost of
// a 1-element add). It rewrites "cuda", "cuda:N" and torch.device("cuda", N) arguments,
// positional or keyword, to the npu device, hands a few functions to Python handlers
// (Tensor.cuda, Tensor.is_cuda, backward, registered from Python), and calls the function.
//
// Called as a bound method of the mode: (mode, func, types, args, kwargs). The mode is
// off the stack while its handler runs (PyTorch stashes it), so the call below does not
// come back here.
#include <torch/csrc/Device.h>
#include <torch/extension.h>

#include <cstring>

namespace {

PyObject* g_handlers = nullptr;  // dict: func -> callable(func, types, args, kwargs)
PyObject* g_npu_name = nullptr;  // "npu"

// A new reference to the npu replacement of `obj`, or nullptr if `obj` is no cuda device.
PyObject* npu_replacement(PyObject* obj) {
  if (PyUnicode_Check(obj)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(obj, &size);
    if (text == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    if (size < 4 || std::strncmp(text, "cuda", 4) != 0) return nullptr;
    if (size == 4) {
      Py_INCREF(g_npu_name);
      return g_npu_name;
    }
    if (text[4] != ':') return nullptr;
    return PyUnicode_FromFormat("npu%s", text + 4);
  }
  if (THPDevice_Check(obj)) {
    const c10::Device& device = reinterpret_cast<THPDevice*>(obj)->device;
    if (device.type() != c10::DeviceType::CUDA) return nullptr;
    return THPDevice_New(c10::Device(c10::DeviceType::PrivateUse1, device.index()));
  }
  return nullptr;
}

// args with cuda devices replaced: a new tuple, or nullptr (no error) when nothing changes.
PyObject* rewrite_args(PyObject* args) {
  PyObject* rewritten = nullptr;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* replacement = npu_replacement(PyTuple_GET_ITEM(args, i));
    if (replacement == nullptr) continue;
    if (rewritten == nullptr) {
      rewritten = PyTuple_New(n);
      if (rewritten == nullptr) {
        Py_DECREF(replacement);
        return nullptr;
      }
      for (Py_ssize_t j = 0; j < n; ++j) {
        PyObject* item = PyTuple_GET_ITEM(args, j);
        Py_INCREF(item);
        PyTuple_SET_ITEM(rewritten, j, item);
      }
    }
    Py_DECREF(PyTuple_GET_ITEM(rewritten, i));
    PyTuple_SET_ITEM(rewritten, i, replacement);
  }
  return rewritten;
}

// kwargs with cuda devices replaced: a new dict, or nullptr (no error) when nothing changes.
PyObject* rewrite_kwargs(PyObject* kwargs) {
  PyObject* rewritten = nullptr;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    PyObject* replacement = npu_replacement(value);
    if (replacement == nullptr) continue;
    if (rewritten == nullptr) {
      rewritten = PyDict_Copy(kwargs);
      if (rewritten == nullptr) {
        Py_DECREF(replacement);
        return nullptr;
      }
    }
    int failed = PyDict_SetItem(rewritten, key, replacement);
    Py_DECREF(replacement);
    if (failed) {
      Py_DECREF(rewritten);
      return nullptr;
    }
  }
  return rewritten;
}

PyObject* torch_function(PyObject* /*module*/, PyObject* const* argv, Py_ssize_t nargs) {
  if (nargs < 2 || nargs > 5) {
    PyErr_SetString(PyExc_TypeError, "__torch_function__(func, types, args=(), kwargs=None)");
    return nullptr;
  }
  PyObject* func = argv[1];
  PyObject* types = argv[2];
  PyObject* args = nargs > 3 ? argv[3] : nullptr;
  PyObject* kwargs = nargs > 4 ? argv[4] : nullptr;
  if (args != nullptr && !PyTuple_Check(args)) {
    PyErr_SetString(PyExc_TypeError, "__torch_function__: args must be a tuple");
    return nullptr;
  }
  if (kwargs == Py_None) kwargs = nullptr;
  if (kwargs != nullptr && !PyDict_Check(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "__torch_function__: kwargs must be a dict or None");
    return nullptr;
  }
  PyObject* empty = nullptr;
  if (args == nullptr) {
    empty = PyTuple_New(0);
    if (empty == nullptr) return nullptr;
    args = empty;
  }
  PyObject* new_args = nullptr;
  PyObject* new_kwargs = nullptr;
  PyObject* result = nullptr;
  new_args = rewrite_args(args);
  if (PyErr_Occurred()) goto done;
  if (kwargs != nullptr) {
    new_kwargs = rewrite_kwargs(kwargs);
    if (PyErr_Occurred()) goto done;
  }
  {
    PyObject* call_args = new_args != nullptr ? new_args : args;
    PyObject* call_kwargs = new_kwargs != nullptr ? new_kwargs : kwargs;
    PyObject* handler =
        g_handlers != nullptr ? PyDict_GetItemWithError(g_handlers, func) : nullptr;
    if (handler != nullptr) {
      result = PyObject_CallFunctionObjArgs(
          handler, func, types, call_args, call_kwargs != nullptr ? call_kwargs : Py_None, nullptr);
    } else if (!PyErr_Occurred()) {
      result = PyObject_Call(func, call_args, call_kwargs);
    }
  }
done:
  Py_XDECREF(new_args);
  Py_XDECREF(new_kwargs);
  Py_XDECREF(empty);
  return result;
}

PyMethodDef torch_function_def = {
    "_device_redirect_torch_function",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&torch_function)),
    METH_FASTCALL,
    "transfer_to_npu's __torch_function__(mode, func, types, args=(), kwargs=None): "
    "calls func with cuda device arguments replaced by npu ones."};

}  // namespace

namespace torch_npu {

void register_device_redirect(py::module& m) {
  g_npu_name = PyUnicode_InternFromString("npu");
  PyObject* fn = PyCFunction_New(&torch_function_def, nullptr);
  if (fn == nullptr) throw py::error_already_set();
  m.attr("_device_redirect_torch_function") = py::reinterpret_steal<py::object>(fn);
  // The Python handlers, by function: {func: handler(func, types, args, kwargs)}.
  m.def("_set_device_redirect_handlers", [](py::dict handlers) {
    Py_XDECREF(g_handlers);
    g_handlers = handlers.release().ptr();
  });
}

}  // namespace torch_npu
