# Shared build helpers for kcsi areas.

find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: install the Debian package 'pkg-config' (or run scripts/deps.sh)")
endif()
find_package(Threads REQUIRED)

# kcsi_require(<prefix> <pkg-config module> <debian package>)
# Finds a library with pkg-config and defines the imported target PkgConfig::<prefix>.
# Fails with a message that names the Debian package to install.
function(kcsi_require prefix module debpkg)
  if(TARGET PkgConfig::${prefix})
    return()
  endif()
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "library '${module}' not found by pkg-config: "
                        "install the Debian package '${debpkg}' (or run scripts/deps.sh)")
  endif()
endfunction()

# kcsi_require_program(<var> <program> <debian package>)
function(kcsi_require_program var program debpkg)
  find_program(${var} ${program})
  if(NOT ${var})
    message(FATAL_ERROR "program '${program}' not found: "
                        "install the Debian package '${debpkg}' (or run scripts/deps.sh)")
  endif()
  set(${var} ${${var}} PARENT_SCOPE)
endfunction()

# Every library the project uses, checked up front so a missing one is reported at configure time.
kcsi_require(GNUTLS  gnutls         libgnutls28-dev)
# libcurl is only emulator_bench's load generator: an HTTP client nobody here wrote.
kcsi_require(CURL    libcurl        libcurl4-openssl-dev)
kcsi_require(JANSSON jansson        libjansson-dev)
kcsi_require(YAML    yaml-0.1       libyaml-dev)
kcsi_require(NGHTTP2 libnghttp2     libnghttp2-dev)
kcsi_require(PROTOBUFC libprotobuf-c libprotobuf-c-dev)
kcsi_require(MHD     libmicrohttpd  libmicrohttpd-dev)
kcsi_require_program(PROTOC_C protoc-c protobuf-c-compiler)
if(NOT EXISTS /usr/include/google/protobuf/wrappers.proto)
  message(FATAL_ERROR "google/protobuf/wrappers.proto not found: install the Debian package "
                      "'libprotobuf-dev' (or run scripts/deps.sh)")
endif()

# Test names. The sanitizer build's tests are named "asan.<name>" so that one ctest runs the tests
# of both builds side by side (scripts/test.sh, make test) and a RESOURCE_LOCK one declares holds
# against the other's; they get the sanitizers' options from their own environment. Refer to a
# test as kcsi_test_name(<var> e2e.x) or set its properties with kcsi_test_properties().
if(KCSI_SANITIZE)
  set(KCSI_TEST_PREFIX "asan.")
  set(KCSI_TEST_ENV "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0"
                    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  set(KCSI_TEST_LABEL asan)
else()
  set(KCSI_TEST_PREFIX "")
  set(KCSI_TEST_ENV "")
  set(KCSI_TEST_LABEL normal)
endif()

# kcsi_test_properties(<name>... PROPERTIES <prop> <value>...): set_tests_properties() for the
# tests of this build named <name> (e2e.x, unit.y), where they exist (a SLOW scenario is not
# registered in the sanitizer build). Values are single words; kcsi_test_labels() adds labels.
function(kcsi_test_properties)
  cmake_parse_arguments(P "" "" "PROPERTIES" ${ARGN})
  foreach(t ${P_UNPARSED_ARGUMENTS})
    if(TEST ${KCSI_TEST_PREFIX}${t})
      set_tests_properties(${KCSI_TEST_PREFIX}${t} PROPERTIES ${P_PROPERTIES})
    endif()
  endforeach()
endfunction()

# kcsi_test_labels(<name> <label>...): adds labels to this build's test <name>, where it exists.
function(kcsi_test_labels name)
  if(TEST ${KCSI_TEST_PREFIX}${name})
    set_property(TEST ${KCSI_TEST_PREFIX}${name} APPEND PROPERTY LABELS ${ARGN})
  endif()
endfunction()

# kcsi_add_test(<name> <label> <timeout> COMMAND...): add_test() under this build's name, with
# the label, the build's label (normal or asan) and the sanitizers' environment.
function(kcsi_add_test name label timeout)
  add_test(NAME ${KCSI_TEST_PREFIX}${name} COMMAND ${ARGN})
  set_tests_properties(${KCSI_TEST_PREFIX}${name} PROPERTIES LABELS "${label};${KCSI_TEST_LABEL}"
                       TIMEOUT ${timeout})
  if(KCSI_TEST_ENV)
    set_tests_properties(${KCSI_TEST_PREFIX}${name} PROPERTIES ENVIRONMENT "${KCSI_TEST_ENV}")
  endif()
  # tests/resources.cmake's table: locks, cores, limits, cost, labels
  if(DEFINED KCSI_RES_${name})
    set_tests_properties(${KCSI_TEST_PREFIX}${name} PROPERTIES ${KCSI_RES_${name}})
  endif()
  if(DEFINED KCSI_RESLABEL_${name})
    set_property(TEST ${KCSI_TEST_PREFIX}${name} APPEND PROPERTY LABELS ${KCSI_RESLABEL_${name}})
  endif()
endfunction()

# kcsi_unit_test(<name> SOURCES <files...> LIBS <libs...>)
# Builds tests/unit/<name> style executables and registers them with CTest under the label "unit".
function(kcsi_unit_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  kcsi_add_test(unit.${name} unit 300 ${name})
endfunction()

# The scenarios run Debian's python3, which scripts/deps.sh installs with python3-yaml: a python3
# earlier in PATH may be a version manager's shim (pyenv's runs three bash scripts before the
# interpreter: 0.6 s of CPU a run against 0.05 s, and the suite runs python3 about 300 times).
if(EXISTS /usr/bin/python3)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/tests/python)
  file(CREATE_LINK /usr/bin/python3 ${CMAKE_BINARY_DIR}/tests/python/python3 SYMBOLIC)
endif()

# kcsi_e2e_test(<name> <script> [TIMEOUT seconds] [SLOW] [ARGS arg...])
# Registers a shell scenario; it gets KCSI_BIN (the binaries), KCSI_SRC (the source tree),
# KCSI_PEERS (the peers scripts/peers.sh built) and, first on PATH, the peers' kubectl v1.37.2.
# ARGS are passed to the script, so one scenario can be registered over several sets.
# SLOW scenarios run in the normal build only: long crash/kill loops, many objects, minutes of
# waiting on intervals and backoffs, and the drop-in differentials (half their time is upstream's
# binary). The sanitizer build would add minutes to CI and finds nothing there that the short
# scenarios of the same code (the sidecars' own e2e) do not reach.
function(kcsi_e2e_test name script)
  cmake_parse_arguments(T "SLOW" "TIMEOUT" "ARGS" ${ARGN})
  if(T_SLOW AND KCSI_SANITIZE)
    return()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  kcsi_add_test(e2e.${name} e2e ${T_TIMEOUT} bash ${script} ${T_ARGS})
  set(env "KCSI_BIN=${CMAKE_BINARY_DIR}/bin" "KCSI_SRC=${CMAKE_SOURCE_DIR}"
      "KCSI_TESTS=${CMAKE_BINARY_DIR}/tests" "KCSI_PEERS=${CMAKE_SOURCE_DIR}/build-peers/bin"
      ${KCSI_TEST_ENV})
  # the PATH ctest runs with, the peers' kubectl and Debian's python3 (tests/python, above) first
  set_tests_properties(${KCSI_TEST_PREFIX}e2e.${name} PROPERTIES ENVIRONMENT "${env}"
    ENVIRONMENT_MODIFICATION
      "PATH=path_list_prepend:${CMAKE_BINARY_DIR}/tests/python;PATH=path_list_prepend:${CMAKE_SOURCE_DIR}/build-peers/kubectl")
endfunction()
