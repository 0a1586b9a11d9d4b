#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
typedef int (*launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
static launch_t cu_launch;
static PyObject* launch(PyObject* self, PyObject* const* a, Py_ssize_t n) {
  if (n != 10) { PyErr_SetString(PyExc_TypeError, "launch takes 10 arguments"); return NULL; }
  void* fn = PyLong_AsVoidPtr(a[0]);
  unsigned g[7];
  for (int i = 0; i < 7; i++) g[i] = (unsigned)PyLong_AsUnsignedLong(a[1 + i]);
  void* stream = PyLong_AsVoidPtr(a[8]);
  void* extra = PyLong_AsVoidPtr(a[9]);
  if (PyErr_Occurred()) return NULL;
  int code = cu_launch(fn, g[0], g[1], g[2], g[3], g[4], g[5], g[6], stream, NULL, (void**)extra);
  return PyLong_FromLong(code);
}
static PyMethodDef methods[] = {{"launch", (PyCFunction)(void(*)(void))launch, METH_FASTCALL, "launch"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_claunch", NULL, -1, methods};
PyMODINIT_FUNC PyInit__claunch(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) { PyErr_SetString(PyExc_OSError, "libcuda.so.1"); return NULL; }
  cu_launch = (launch_t)dlsym(lib, "cuLaunchKernel");
  return PyModule_Create(&mod);
}
