# install.cmake - what `cmake --install build --prefix P` puts under P:
#   include/fajit.h
#   lib/libfajit.so (with its soname links) and lib/libfajit.a
#   bin/fagen
#   lib/cmake/fajit/{fajitConfig,fajitConfigVersion,fajitTargets}.cmake: find_package(fajit) gives
#     fajit::fajit (shared) and fajit::fajit_static
#   lib/pkgconfig/fajit.pc: `pkg-config --cflags --libs fajit` (add --static for libfajit.a's dependencies)
# ("lib" is GNUInstallDirs' CMAKE_INSTALL_LIBDIR.) Both package files locate the prefix from where they
# lie, so the installed tree can be moved. examples/ builds against it both ways (scripts/check-install.sh).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FAJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fajit)

install(FILES include/fajit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fajit_shared fajit_static EXPORT fajitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fagen RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT fajitTargets NAMESPACE fajit:: DESTINATION ${FAJIT_CMAKE_DIR})

configure_package_config_file(cmake/fajitConfig.cmake.in ${PROJECT_BINARY_DIR}/fajitConfig.cmake
  INSTALL_DESTINATION ${FAJIT_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fajitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fajitConfig.cmake ${PROJECT_BINARY_DIR}/fajitConfigVersion.cmake
  DESTINATION ${FAJIT_CMAKE_DIR})

# fajit.pc: the prefix is found relative to the file itself (${pcfiledir}), e.g. "../.." from lib/pkgconfig
file(RELATIVE_PATH FAJIT_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" FAJIT_PC_TO_PREFIX "${FAJIT_PC_TO_PREFIX}")
configure_file(cmake/fajit.pc.in ${PROJECT_BINARY_DIR}/fajit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fajit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
