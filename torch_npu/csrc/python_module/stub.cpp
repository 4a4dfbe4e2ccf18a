// torch_npu._C, the Python module of the npu runtime, is this empty object linked to
// libtorch_npu.so (found through the rpath $ORIGIN/lib). The library defines PyInit__C
// (module.cpp); Python looks the symbol up through the module's dependencies, so the
// module and every C++ extension linked with -ltorch_npu share one loaded runtime.
