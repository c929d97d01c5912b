/*
 * The three C23 entry points of glibc 2.38 that uWebSockets.js 20.57's Linux
 * binaries call, for glibc 2.36 and 2.37 (Debian 12, Fedora 37/38), which lack
 * them. Built at install by scripts/uws-native.mjs with the machine's cc and
 * loaded (RTLD_GLOBAL) by core/worker/http.ts before lb's patched copy of the
 * binary, whose GLIBC_2.38 version need is marked weak.
 *
 * Why forwarding is exact here: the C23 forms differ from the C99 ones only in
 * accepting binary literals ("0b101" with base 0 or 2, "%i", "%b"); uWS parses
 * decimal and hex numbers (ports, lengths, chunk sizes), never binary ones.
 *
 * napi_register_module_v1 makes the file a valid (empty) Node-API module, so
 * Node's process.dlopen keeps it loaded instead of unloading a library that
 * registered nothing.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int __isoc23_sscanf (const char *s, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsscanf(s, format, ap);
  va_end(ap);
  return n;
}

long __isoc23_strtol (const char *s, char **end, int base) {
  return strtol(s, end, base);
}

unsigned long __isoc23_strtoul (const char *s, char **end, int base) {
  return strtoul(s, end, base);
}

void *napi_register_module_v1 (void *env, void *exports) {
  (void)env;
  return exports;
}
