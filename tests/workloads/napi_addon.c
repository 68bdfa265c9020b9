// A Node-API addon for tests/workloads/napi_chain.js: callBack(fn, n) calls the JavaScript function fn(n)
// from C, so that a sample in fn shows JavaScript -> C -> JavaScript. Node-API is a stable C ABI; its few
// declarations are written here, so the addon builds without node's headers:
//   gcc -shared -fPIC -O1 -o napi_addon.node napi_addon.c
#include <stddef.h>
#include <stdint.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status;
typedef napi_value (*napi_callback)(napi_env env, napi_callback_info info);

napi_status napi_get_cb_info(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv,
                             napi_value *this_arg, void **data);
napi_status napi_call_function(napi_env env, napi_value recv, napi_value func, size_t argc,
                               const napi_value *argv, napi_value *result);
napi_status napi_create_function(napi_env env, const char *name, size_t length, napi_callback cb, void *data,
                                 napi_value *result);
napi_status napi_set_named_property(napi_env env, napi_value object, const char *name, napi_value value);

// Not inlined into its caller: the frame the test looks for.
__attribute__((noinline)) napi_value addon_call_back(napi_env env, napi_callback_info info)
{
  size_t argc = 2;
  napi_value argv[2];
  napi_value result = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != 0 || argc < 2)
    return NULL;
  napi_call_function(env, argv[0], argv[0], 1, &argv[1], &result);
  return result;
}

napi_value napi_register_module_v1(napi_env env, napi_value exports)
{
  napi_value fn;
  if (napi_create_function(env, "callBack", (size_t)-1, addon_call_back, NULL, &fn) == 0)
    napi_set_named_property(env, exports, "callBack", fn);
  return exports;
}

int32_t node_api_module_get_api_version_v1(void)
{
  return 8;
}
