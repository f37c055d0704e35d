// A tiny call's host work in C++: keyed, its plan's state found, its outputs made and its
// compiled Triton kernel launched in one Python call, `call(states, extra, *tensors)`,
// instead of the Python of the plan lookup, one `torch.empty*` an output and the Python
// around Triton's C launch function (kernels/native/__init__.py says when it is used).
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <exception>

namespace {

constexpr Py_ssize_t kMaxTensors = 16;  // a call's tensors and outputs, at most
constexpr Py_ssize_t kMaxArgs = 128;    // arguments of Triton's launch function, at most
PyObject* hook_names[2];                // interned at import: the hooks' knob names

// The state's items (kernels.launch.native_state builds it once a plan and documents them).
enum Item : Py_ssize_t {
  kTemplates,    // tuple of tensors: the outputs are made like these
  kPasses,       // tuple of ints: which given tensors the kernel takes, before the outputs
  kLaunch,       // Triton's C launch function
  kHead,         // tuple: its arguments before the stream
  kMiddle,       // tuple: between the stream and the tensors
  kTail,         // tuple: after the tensors
  kSpread,       // bool: tensors and tail spread (Triton 3.6) or one tuple (later Tritons)
  kDevice,       // int: the device the kernel was loaded on
  kCurrent,      // callable: the current device
  kStream,       // callable: a device's current stream
  kHooks,        // Triton's runtime knobs
  kEnter,        // its launch_enter_hook then
  kLeave,        // its launch_exit_hook then
  kEnterCalls,   // list: the enter chain's hooks
  kLeaveCalls,   // list: the exit chain's hooks
  kStateItems,
};

// Whether every object is a tensor; with `exact`, a plain one (a subclass may override what
// the op does through __torch_function__: the Python path honours that).
bool all_tensors(PyObject* const* objects, Py_ssize_t n, bool exact = false) {
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!(exact ? THPVariable_CheckExact(objects[i]) : THPVariable_Check(objects[i]))) {
      return false;
    }
  }
  return true;
}

// A tuple of new uninitialized contiguous tensors, one per tensor of the tuple `templates`
// (launch_state bounds their count), each with its template's shape, dtype and device;
// `made` gets them too. nullptr and a Python error where a template is not a tensor or
// allocation fails.
PyObject* new_outputs(PyObject* templates, at::Tensor* made) {
  const Py_ssize_t n = PyTuple_GET_SIZE(templates);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!THPVariable_Check(PyTuple_GET_ITEM(templates, i))) {
      PyErr_Format(PyExc_TypeError, "call: the state's template %zd is not a tensor", i);
      return nullptr;
    }
  }
  PyObject* result = PyTuple_New(n);
  if (result == nullptr) {
    return nullptr;
  }
  try {
    for (Py_ssize_t i = 0; i < n; ++i) {
      const at::Tensor& like = THPVariable_Unpack(PyTuple_GET_ITEM(templates, i));
      made[i] = at::empty(like.sizes(), like.options());  // contiguous by default
      PyObject* wrapped = THPVariable_Wrap(made[i]);
      if (wrapped == nullptr) {
        Py_DECREF(result);
        return nullptr;
      }
      PyTuple_SET_ITEM(result, i, wrapped);  // steals the reference
    }
  } catch (const std::exception& e) {
    Py_DECREF(result);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  return result;
}

bool well_formed(PyObject* state) {
  if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != kStateItems) {
    return false;
  }
  PyObject* const* s = &PyTuple_GET_ITEM(state, 0);
  return PyTuple_Check(s[kTemplates]) && PyTuple_Check(s[kPasses]) && PyTuple_Check(s[kHead]) &&
         PyTuple_Check(s[kMiddle]) && PyTuple_Check(s[kTail]) && PyList_Check(s[kEnterCalls]) &&
         PyList_Check(s[kLeaveCalls]);
}

// 1 where the call may launch here, 0 where it must take the Python path (another current
// device, launch hooks installed since: the checks of kernels.launch's lean path), -1 on error.
int may_launch(PyObject* const* s) {
  PyObject* now = PyObject_CallNoArgs(s[kCurrent]);
  if (now == nullptr) {
    return -1;
  }
  const int same = PyObject_RichCompareBool(now, s[kDevice], Py_EQ);
  Py_DECREF(now);
  if (same <= 0) {
    return same;
  }
  if (PyList_GET_SIZE(s[kEnterCalls]) != 0 || PyList_GET_SIZE(s[kLeaveCalls]) != 0) {
    return 0;
  }
  for (int i = 0; i < 2; ++i) {
    PyObject* hook = PyObject_GetAttr(s[kHooks], hook_names[i]);
    if (hook == nullptr) {
      return -1;
    }
    Py_DECREF(hook);  // only its identity is compared
    if (hook != s[kEnter + i]) {
      return 0;
    }
  }
  return 1;
}

// The launch of `state` on the given tensors: new outputs, then Triton's C function called
// with head, stream, middle, the passed tensors' and the outputs' addresses, and the tail.
// Returns the outputs (the tensor itself where there is one), None where `may_launch` says
// no, nullptr on a Python error. `call` has checked that the tensors are tensors.
PyObject* launch_state(PyObject* state, PyObject* const* tensors, Py_ssize_t n_tensors) {
  if (!well_formed(state)) {
    PyErr_SetString(PyExc_TypeError, "call: a malformed native state");
    return nullptr;
  }
  PyObject* const* s = &PyTuple_GET_ITEM(state, 0);
  PyObject *passes = s[kPasses], *head = s[kHead], *middle = s[kMiddle], *tail = s[kTail];
  const Py_ssize_t n_passed = PyTuple_GET_SIZE(passes);
  const Py_ssize_t n_ptrs = n_passed + PyTuple_GET_SIZE(s[kTemplates]);
  const Py_ssize_t n_head = PyTuple_GET_SIZE(head), n_middle = PyTuple_GET_SIZE(middle);
  const Py_ssize_t n_tail = PyTuple_GET_SIZE(tail);
  const bool spread = s[kSpread] == Py_True;
  if (n_ptrs > kMaxTensors || n_head + 1 + n_middle + (spread ? n_ptrs + n_tail : 1) > kMaxArgs) {
    PyErr_SetString(PyExc_TypeError, "call: more tensors or arguments than a state holds");
    return nullptr;
  }
  void* pointers[kMaxTensors];
  for (Py_ssize_t i = 0; i < n_passed; ++i) {
    const Py_ssize_t which = PyLong_AsSsize_t(PyTuple_GET_ITEM(passes, i));
    if (which < 0 || which >= n_tensors) {
      if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_TypeError, "call: the state passes a tensor not given");
      }
      return nullptr;
    }
    try {
      pointers[i] = THPVariable_Unpack(tensors[which]).data_ptr();
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
      return nullptr;
    }
  }
  const int go = may_launch(s);
  if (go <= 0) {
    return go < 0 ? nullptr : Py_NewRef(Py_None);
  }
  at::Tensor made[kMaxTensors];
  PyObject* outputs = new_outputs(s[kTemplates], made);
  if (outputs == nullptr) {
    return nullptr;
  }
  for (Py_ssize_t i = n_passed; i < n_ptrs; ++i) {
    pointers[i] = made[i - n_passed].data_ptr();
  }
  // New references, released after the call: the stream, each address, the packed tuple.
  PyObject* owned[kMaxTensors + 2] = {};
  Py_ssize_t n_owned = 0;
  bool ok = (owned[n_owned++] = PyObject_CallOneArg(s[kStream], s[kDevice])) != nullptr;
  for (Py_ssize_t i = 0; ok && i < n_ptrs; ++i) {
    ok = (owned[n_owned++] = PyLong_FromVoidPtr(pointers[i])) != nullptr;
  }
  PyObject* argv[kMaxArgs];
  Py_ssize_t n_argv = 0;
  if (ok) {
    for (Py_ssize_t i = 0; i < n_head; ++i) argv[n_argv++] = PyTuple_GET_ITEM(head, i);
    argv[n_argv++] = owned[0];
    for (Py_ssize_t i = 0; i < n_middle; ++i) argv[n_argv++] = PyTuple_GET_ITEM(middle, i);
    if (spread) {
      for (Py_ssize_t i = 0; i < n_ptrs; ++i) argv[n_argv++] = owned[1 + i];
      for (Py_ssize_t i = 0; i < n_tail; ++i) argv[n_argv++] = PyTuple_GET_ITEM(tail, i);
    } else {
      PyObject* packed = PyTuple_New(n_ptrs + n_tail);
      ok = packed != nullptr;
      if (ok) {
        for (Py_ssize_t i = 0; i < n_ptrs; ++i) {
          PyTuple_SET_ITEM(packed, i, Py_NewRef(owned[1 + i]));
        }
        for (Py_ssize_t i = 0; i < n_tail; ++i) {
          PyTuple_SET_ITEM(packed, n_ptrs + i, Py_NewRef(PyTuple_GET_ITEM(tail, i)));
        }
        owned[n_owned++] = packed;
        argv[n_argv++] = packed;
      }
    }
  }
  PyObject* done = ok ? PyObject_Vectorcall(s[kLaunch], argv, n_argv, nullptr) : nullptr;
  for (Py_ssize_t i = 0; i < n_owned; ++i) {
    Py_XDECREF(owned[i]);
  }
  if (done == nullptr) {
    Py_DECREF(outputs);
    return nullptr;
  }
  Py_DECREF(done);
  if (PyTuple_GET_SIZE(outputs) == 1) {
    PyObject* only = Py_NewRef(PyTuple_GET_ITEM(outputs, 0));
    Py_DECREF(outputs);
    return only;
  }
  return outputs;
}

// What a call's plan depends on of its tensors, as one tuple: each tensor's sizes and
// strides, dtype, device and whether its data is 16-byte aligned (a compiled kernel assumes
// what its first call's pointers were), then `extra` (the call's other arguments; a list
// keys as the tuple of its items, as aten passes sizes). nullptr on a Python error.
PyObject* make_key(PyObject* extra, PyObject* const* tensors, Py_ssize_t n) {
  Py_ssize_t size = 1;
  for (Py_ssize_t k = 0; k < n; ++k) size += 2 * THPVariable_Unpack(tensors[k]).dim() + 5;
  PyObject* key = PyTuple_New(size);  // a slot left empty by an error is skipped on free
  if (key == nullptr) {
    return nullptr;
  }
  Py_ssize_t i = 0;
  try {
    for (Py_ssize_t k = 0; k < n; ++k) {
      const at::Tensor& t = THPVariable_Unpack(tensors[k]);
      const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());  // throws first
      const int64_t dim = t.dim();
      PyTuple_SET_ITEM(key, i++, PyLong_FromLongLong(dim));
      for (int64_t d = 0; d < dim; ++d) PyTuple_SET_ITEM(key, i++, PyLong_FromLongLong(t.size(d)));
      for (int64_t d = 0; d < dim; ++d) {
        PyTuple_SET_ITEM(key, i++, PyLong_FromLongLong(t.stride(d)));
      }
      PyTuple_SET_ITEM(key, i++, PyLong_FromLong(static_cast<long>(t.scalar_type())));
      PyTuple_SET_ITEM(key, i++, PyLong_FromLong(static_cast<long>(t.device().type())));
      PyTuple_SET_ITEM(key, i++, PyLong_FromLong(t.device().index()));
      PyTuple_SET_ITEM(key, i++, PyBool_FromLong(address % 16 == 0));
    }
  } catch (const std::exception& e) {  // a tensor without storage (sparse): no key
    Py_DECREF(key);
    PyErr_SetString(PyExc_TypeError, e.what());
    return nullptr;
  }
  PyTuple_SET_ITEM(key, i++, PyList_Check(extra) ? PyList_AsTuple(extra) : Py_NewRef(extra));
  for (Py_ssize_t j = 0; j < size; ++j) {
    if (PyTuple_GET_ITEM(key, j) == nullptr) {  // an int or tuple not made: out of memory
      Py_DECREF(key);
      return nullptr;
    }
  }
  return key;
}

// key(extra, *tensors) -> the key `call` looks a state up by (make_key).
PyObject* key(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n < 1 || !all_tensors(args + 1, n - 1)) {
    PyErr_SetString(PyExc_TypeError, "key(extra, *tensors): the call's arguments and tensors");
    return nullptr;
  }
  return make_key(args[0], args + 1, n - 1);
}

// call(states, extra, *tensors) -> launch(states[key(extra, *tensors)], *tensors): a whole
// call in C++ where a plan for it has a state; None where none has (or an argument is not a
// tensor, or `extra` is unhashable), for the Python path, which plans, checks and raises.
PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n < 2 || !PyDict_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "call(states, extra, *tensors): a dict first");
    return nullptr;
  }
  if (!all_tensors(args + 2, n - 2, /*exact=*/true)) {
    Py_RETURN_NONE;
  }
  PyObject* k = make_key(args[1], args + 2, n - 2);
  if (k == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
      return nullptr;
    }
    PyErr_Clear();  // a tensor without data: the Python path copes
    Py_RETURN_NONE;
  }
  PyObject* state = PyDict_GetItemWithError(args[0], k);  // borrowed
  Py_DECREF(k);
  if (state == nullptr) {
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
        return nullptr;
      }
      PyErr_Clear();  // an unhashable argument: the Python path copes
    }
    Py_RETURN_NONE;
  }
  Py_INCREF(state);  // the launch runs Python, which could change the dict
  PyObject* result = launch_state(state, args + 2, n - 2);
  Py_DECREF(state);
  return result;
}

#define FASTCALL(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f)), METH_FASTCALL

PyMethodDef methods[] = {
    {"key", FASTCALL(key), "key(extra, *tensors) -> the key call() looks a state up by"},
    {"call", FASTCALL(call), "call(states, extra, *tensors) -> launch(states[key], ...) or None"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels_host", nullptr, -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__kernels_host() {
  hook_names[0] = PyUnicode_InternFromString("launch_enter_hook");
  hook_names[1] = PyUnicode_InternFromString("launch_exit_hook");
  if (hook_names[0] == nullptr || hook_names[1] == nullptr) {
    return nullptr;
  }
  return PyModule_Create(&module);
}
