"""The folder of EmberLlamaBuild.cmake, for scikit-build-core's `cmake.module` entry point."""
