// A tiny call's host work in C++: its outputs made and its compiled Triton kernel launched in
// one Python call, instead of one `torch.empty*` an output and the Python around Triton's C
// launch function (kernels/native/__init__.py says when it is used).
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <exception>
#include <vector>

namespace {


// A tuple of new uninitialized contiguous tensors, one per tensor of the tuple `templates`,
// each with its template's shape, dtype and device; `made` gets them too. nullptr and a
// Python error where a template is not a tensor or allocation fails.
PyObject* new_outputs(PyObject* templates, std::vector<at::Tensor>& made) {
  const Py_ssize_t n = PyTuple_GET_SIZE(templates);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!THPVariable_Check(PyTuple_GET_ITEM(templates, i))) {
      PyErr_Format(PyExc_TypeError, "empty_like: argument %zd is not a tensor", i);
      return nullptr;
    }
  }
  PyObject* result = PyTuple_New(n);
  if (result == nullptr) {
    return nullptr;
  }
  try {
    for (Py_ssize_t i = 0; i < n; ++i) {
      made.push_back(at::empty_like(
          THPVariable_Unpack(PyTuple_GET_ITEM(templates, i)), at::MemoryFormat::Contiguous));
      PyObject* wrapped = THPVariable_Wrap(made.back());
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

// empty_like(*templates) -> tuple of new uninitialized contiguous tensors, one per template,
// each with its template's shape, dtype and device.
PyObject* empty_like(PyObject*, PyObject* const* args, Py_ssize_t n) {
  PyObject* templates = PyTuple_New(n);
  if (templates == nullptr) {
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SET_ITEM(templates, i, args[i]);
  }
  std::vector<at::Tensor> made;
  PyObject* result = new_outputs(templates, made);
  Py_DECREF(templates);
  return result;
}

// launch(state, x) -> the new outputs after launching, or None where the state's checks say
// this call must take the Python path (another current device, launch hooks installed). The
// state, built once a plan by kernels.launch.native_state (which documents its items):
// (templates, launch, head, middle, tail, spread, device, current_device, raw_stream,
//  hooks, enter, leave, enter_calls, leave_calls).
PyObject* launch_state(PyObject* state, PyObject* x) {
  constexpr Py_ssize_t kState = 14;
  if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != kState || !THPVariable_Check(x)) {
    PyErr_SetString(PyExc_TypeError, "launch(state, x): a native state tuple and a tensor");
    return nullptr;
  }
  PyObject* const* s = &PyTuple_GET_ITEM(state, 0);
  PyObject *templates = s[0], *launch_fn = s[1], *head = s[2], *middle = s[3], *tail = s[4];
  const bool spread = s[5] == Py_True;
  PyObject *device = s[6], *current_device = s[7], *raw_stream = s[8], *hooks = s[9];
  if (!PyTuple_Check(templates) || !PyTuple_Check(head) || !PyTuple_Check(middle) ||
      !PyTuple_Check(tail) || !PyList_Check(s[12]) || !PyList_Check(s[13])) {
    PyErr_SetString(PyExc_TypeError, "launch: a malformed native state");
    return nullptr;
  }
  // The checks of kernels.launch's lean path: the device the kernel was loaded on, no hooks.
  PyObject* now = PyObject_CallNoArgs(current_device);
  if (now == nullptr) {
    return nullptr;
  }
  int same = PyObject_RichCompareBool(now, device, Py_EQ);
  Py_DECREF(now);
  if (same < 0) {
    return nullptr;
  }
  if (!same || PyList_GET_SIZE(s[12]) != 0 || PyList_GET_SIZE(s[13]) != 0) {
    Py_RETURN_NONE;
  }
  static const char* kHooks[2] = {"launch_enter_hook", "launch_exit_hook"};
  for (int i = 0; i < 2; ++i) {
    PyObject* hook = PyObject_GetAttrString(hooks, kHooks[i]);
    if (hook == nullptr) {
      return nullptr;
    }
    Py_DECREF(hook);  // only its identity is compared
    if (hook != s[10 + i]) {
      Py_RETURN_NONE;
    }
  }
  std::vector<at::Tensor> made;
  PyObject* outputs = new_outputs(templates, made);
  if (outputs == nullptr) {
    return nullptr;
  }
  PyObject* stream = PyObject_CallOneArg(raw_stream, device);
  if (stream == nullptr) {
    Py_DECREF(outputs);
    return nullptr;
  }
  // The C function's arguments: head, stream, middle, then the tensors' addresses and the
  // tail, spread (Triton 3.6) or as one tuple (later Tritons).
  const Py_ssize_t n_ptrs = 1 + static_cast<Py_ssize_t>(made.size());
  std::vector<PyObject*> owned;  // new references to release after the call
  owned.reserve(n_ptrs + 2);
  owned.push_back(stream);
  owned.push_back(PyLong_FromVoidPtr(THPVariable_Unpack(x).data_ptr()));
  for (const at::Tensor& t : made) {
    owned.push_back(PyLong_FromVoidPtr(t.data_ptr()));
  }
  bool ok = true;
  for (PyObject* o : owned) {
    ok = ok && o != nullptr;
  }
  std::vector<PyObject*> call;
  const Py_ssize_t n_head = PyTuple_GET_SIZE(head), n_middle = PyTuple_GET_SIZE(middle),
                   n_tail = PyTuple_GET_SIZE(tail);
  if (ok) {
    call.reserve(n_head + 1 + n_middle + n_ptrs + n_tail);
    for (Py_ssize_t i = 0; i < n_head; ++i) call.push_back(PyTuple_GET_ITEM(head, i));
    call.push_back(stream);
    for (Py_ssize_t i = 0; i < n_middle; ++i) call.push_back(PyTuple_GET_ITEM(middle, i));
    if (spread) {
      for (Py_ssize_t i = 1; i <= n_ptrs; ++i) call.push_back(owned[i]);
      for (Py_ssize_t i = 0; i < n_tail; ++i) call.push_back(PyTuple_GET_ITEM(tail, i));
    } else {
      PyObject* packed = PyTuple_New(n_ptrs + n_tail);
      ok = packed != nullptr;
      if (ok) {
        for (Py_ssize_t i = 0; i < n_ptrs; ++i) {
          Py_INCREF(owned[1 + i]);
          PyTuple_SET_ITEM(packed, i, owned[1 + i]);
        }
        for (Py_ssize_t i = 0; i < n_tail; ++i) {
          PyObject* item = PyTuple_GET_ITEM(tail, i);
          Py_INCREF(item);
          PyTuple_SET_ITEM(packed, n_ptrs + i, item);
        }
        owned.push_back(packed);
        call.push_back(packed);
      }
    }
  }
  PyObject* done = ok ? PyObject_Vectorcall(launch_fn, call.data(), call.size(), nullptr) : nullptr;
  for (PyObject* o : owned) {
    Py_XDECREF(o);
  }
  if (done == nullptr) {
    Py_DECREF(outputs);
    return nullptr;
  }
  Py_DECREF(done);
  return outputs;
}

PyObject* launch(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "launch(state, x): a native state tuple and a tensor");
    return nullptr;
  }
  return launch_state(args[0], args[1]);
}

// What a call's plan depends on of `t`, as a tuple: its sizes and strides, dtype, device,
// whether its data is 16-byte aligned (a compiled kernel assumes what its first call's
// pointers were), then `extra` (the call's other arguments, a list as a tuple). nullptr on
// allocation failure.
PyObject* make_key(const at::Tensor& t, PyObject* extra) {
  const int64_t dim = t.dim();
  PyObject* key = PyTuple_New(2 * dim + 5);
  if (key == nullptr) {
    return nullptr;
  }
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  const auto aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  Py_ssize_t i = 0;
  for (int64_t d = 0; d < dim; ++d) PyTuple_SET_ITEM(key, i++, PyLong_FromLongLong(sizes[d]));
  for (int64_t d = 0; d < dim; ++d) PyTuple_SET_ITEM(key, i++, PyLong_FromLongLong(strides[d]));
  PyTuple_SET_ITEM(key, i++, PyLong_FromLong(static_cast<long>(t.scalar_type())));
  PyTuple_SET_ITEM(key, i++, PyLong_FromLong(static_cast<long>(t.device().type())));
  PyTuple_SET_ITEM(key, i++, PyLong_FromLong(t.device().index()));
  PyTuple_SET_ITEM(key, i++, PyBool_FromLong(aligned));
  // A list (as aten passes sizes) keys as the tuple of its items.
  PyObject* tail = PyList_Check(extra) ? PyList_AsTuple(extra) : (Py_INCREF(extra), extra);
  PyTuple_SET_ITEM(key, i++, tail);
  for (Py_ssize_t j = 0; j < i; ++j) {
    if (PyTuple_GET_ITEM(key, j) == nullptr) {
      Py_DECREF(key);
      return nullptr;
    }
  }
  return key;
}

// key(x, extra) -> the key `call` looks a state up by (make_key).
PyObject* key(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 2 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "key(x, extra): a tensor and the call's other arguments");
    return nullptr;
  }
  return make_key(THPVariable_Unpack(args[0]), args[1]);
}

// call(states, x, extra) -> launch(states[key(x, extra)], x): a whole call in C++ where a
// plan for it has a state; None where none has (or `extra` is unhashable), for the Python
// path, which plans, checks and raises as usual.
PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 3 || !PyDict_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "call(states, x, extra): a dict, a tensor, arguments");
    return nullptr;
  }
  if (!THPVariable_Check(args[1])) {
    Py_RETURN_NONE;
  }
  PyObject* k = make_key(THPVariable_Unpack(args[1]), args[2]);
  if (k == nullptr) {
    return nullptr;
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
  Py_INCREF(state);  // the launch may run Python that changes the dict
  PyObject* result = launch_state(state, args[1]);
  Py_DECREF(state);
  return result;
}

PyMethodDef methods[] = {
    {"empty_like", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(empty_like)),
     METH_FASTCALL, "empty_like(*templates) -> new contiguous tensors shaped like each"},
    {"launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch)),
     METH_FASTCALL, "launch(state, x) -> new outputs after launching, or None"},
    {"key", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(key)), METH_FASTCALL,
     "key(x, extra) -> the key call() looks a state up by"},
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call)), METH_FASTCALL,
     "call(states, x, extra) -> launch(states[key(x, extra)], x), or None"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels_host", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__kernels_host() { return PyModule_Create(&module); }
