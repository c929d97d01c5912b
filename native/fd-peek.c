// Two system calls Node.js does not expose, for the https entry points that
// worker 0 accepts in node:net (core/worker/tls/tls-terminator.ts):
//
//   peek(fd, buf)  recv(MSG_PEEK | MSG_DONTWAIT): the ClientHello's bytes,
//                  left unread, so that whichever TLS library gets the
//                  connection reads them itself. Returns the byte count, 0
//                  when the peer has closed, or -errno (-EAGAIN: nothing yet).
//   dup(fd)        fcntl(F_DUPFD_CLOEXEC): a descriptor of the same connection
//                  that outlives the node:net socket's own (closed with it), to
//                  hand to a uWS app (adoptSocket). Returns it, or -errno.
//
// Node-API (ABI-stable): one build serves every Node version. Built by lb's
// install step (scripts/uws-native.mjs) with cc; without it lb works as
// before, terminating those connections in node:tls (core/net/fd-peek.ts).
#define NAPI_VERSION 8
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>

static int32_t int_arg (napi_env env, napi_value v) {
  int32_t n = -1;
  napi_get_value_int32(env, v, &n);
  return n;
}

static napi_value result (napi_env env, int32_t n) {
  napi_value r;
  napi_create_int32(env, n, &r);
  return r;
}

static napi_value peek (napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  void *data = NULL;
  size_t len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      napi_get_buffer_info(env, argv[1], &data, &len) != napi_ok) return result(env, -EINVAL);
  ssize_t n = recv(int_arg(env, argv[0]), data, len, MSG_PEEK | MSG_DONTWAIT);
  return result(env, n < 0 ? -errno : (int32_t) n);
}

static napi_value dup_fd (napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return result(env, -EINVAL);
  int n = fcntl(int_arg(env, argv[0]), F_DUPFD_CLOEXEC, 0);
  return result(env, n < 0 ? -errno : n);
}

NAPI_MODULE_INIT () {
  napi_value f;
  napi_create_function(env, "peek", NAPI_AUTO_LENGTH, peek, NULL, &f);
  napi_set_named_property(env, exports, "peek", f);
  napi_create_function(env, "dup", NAPI_AUTO_LENGTH, dup_fd, NULL, &f);
  napi_set_named_property(env, exports, "dup", f);
  return exports;
}
