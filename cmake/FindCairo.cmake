# FindCairo: the cairo 2D graphics library (knmf draws its PNG figures with it).
#
# Defines the imported target Cairo::Cairo and Cairo_FOUND, Cairo_INCLUDE_DIR,
# Cairo_LIBRARY, Cairo_VERSION. Searched under CMAKE_PREFIX_PATH (Spack, modules) and the
# system folders (Debian: libcairo2-dev); set Cairo_ROOT to point elsewhere.
find_path(Cairo_INCLUDE_DIR cairo.h PATH_SUFFIXES cairo)
find_library(Cairo_LIBRARY NAMES cairo)
if(Cairo_INCLUDE_DIR AND EXISTS "${Cairo_INCLUDE_DIR}/cairo-version.h")
  file(STRINGS "${Cairo_INCLUDE_DIR}/cairo-version.h" _cairo_v REGEX "#define CAIRO_VERSION_(MAJOR|MINOR|MICRO) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*MICRO ([0-9]+).*" "\\1.\\2.\\3"
         Cairo_VERSION "${_cairo_v}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Cairo REQUIRED_VARS Cairo_LIBRARY Cairo_INCLUDE_DIR
                                  VERSION_VAR Cairo_VERSION)
if(Cairo_FOUND AND NOT TARGET Cairo::Cairo)
  add_library(Cairo::Cairo UNKNOWN IMPORTED)
  set_target_properties(Cairo::Cairo PROPERTIES IMPORTED_LOCATION "${Cairo_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${Cairo_INCLUDE_DIR}")
endif()
mark_as_advanced(Cairo_INCLUDE_DIR Cairo_LIBRARY)
