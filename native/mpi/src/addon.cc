// rmas_mpi.node: the MPI calls of src/dist/mpi.ts (process groups for data-parallel training and sharded
// evaluation under mpirun). Every collective is non-blocking (MPI-3 MPI_I*): the call returns a request id
// and JS polls test(id) between turns of its event loop, so that a rank waiting for its peers still runs
// its signal handlers (the launcher's SIGTERM when another rank dies) and MPI errors come back as
// exceptions: MPI_COMM_WORLD's error handler is MPI_ERRORS_RETURN, not the default abort.
//
// Buffers are JS typed arrays, reduced in place (MPI_IN_PLACE); a request keeps a reference to each of its
// buffers until test() reports it complete. Only the thread that called init() calls MPI
// (MPI_THREAD_FUNNELED).
#include <dlfcn.h>
#include <mpi.h>
#include <napi.h>

#include <map>
#include <string>
#include <vector>

namespace {

struct Pending {
  MPI_Request request;
  std::vector<Napi::Reference<Napi::Value>> keep;
};

std::map<int, Pending> pending;
int nextId = 1;
MPI_Comm localComm = MPI_COMM_NULL;

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len);
}

void check(Napi::Env env, int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  Napi::Error err = Napi::Error::New(env, std::string(what) + ": " + mpiError(code));
  err.Set("mpiCode", Napi::Number::New(env, code));
  throw err;
}

void requireInit(Napi::Env env, const char* what) {
  int up = 0;
  MPI_Initialized(&up);
  int down = 0;
  MPI_Finalized(&down);
  if (!up || down) throw Napi::Error::New(env, std::string(what) + ": MPI is not initialized (call init first)");
}

struct View {
  void* data;
  int count;
  MPI_Datatype type;
};

View viewOf(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsTypedArray()) throw Napi::TypeError::New(env, std::string(what) + ": expected a typed array");
  Napi::TypedArray t = v.As<Napi::TypedArray>();
  Napi::ArrayBuffer buf = t.ArrayBuffer();
  void* data = static_cast<uint8_t*>(buf.Data()) + t.ByteOffset();
  size_t n = t.ElementLength();
  if (n > static_cast<size_t>(INT32_MAX)) throw Napi::RangeError::New(env, std::string(what) + ": more than 2^31 elements");
  MPI_Datatype type;
  switch (t.TypedArrayType()) {
    case napi_float32_array: type = MPI_FLOAT; break;
    case napi_float64_array: type = MPI_DOUBLE; break;
    case napi_int32_array: type = MPI_INT32_T; break;
    case napi_uint8_array: type = MPI_UINT8_T; break;
    default: throw Napi::TypeError::New(env, std::string(what) + ": expected Float32Array, Float64Array, Int32Array or Uint8Array");
  }
  return {data, static_cast<int>(n), type};
}

MPI_Op opOf(Napi::Env env, const Napi::Value& v) {
  std::string op = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (op == "sum") return MPI_SUM;
  if (op == "max") return MPI_MAX;
  if (op == "min") return MPI_MIN;
  throw Napi::TypeError::New(env, "allreduce: op must be sum, max or min");
}

Napi::Value track(Napi::Env env, MPI_Request r, std::initializer_list<Napi::Value> keep) {
  Pending p{r, {}};
  for (const auto& v : keep) p.keep.emplace_back(Napi::Persistent(v));
  int id = nextId++;
  pending.emplace(id, std::move(p));
  return Napi::Number::New(env, id);
}

// The first line of MPI_Get_library_version, up to its first comma ("Open MPI v4.1.6").
std::string libraryVersion() {
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int libLen = 0;
  MPI_Get_library_version(library, &libLen);
  std::string lib(library, libLen);
  size_t eol = lib.find_first_of("\r\n,");
  return eol == std::string::npos ? lib : lib.substr(0, eol);
}

// init(): { rank, size, localRank, localSize, host, thread, library }
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int up = 0;
  MPI_Initialized(&up);
  if (!up) {
    // Open MPI opens its components with dlopen; they resolve libmpi's symbols globally, which a library
    // loaded by Node's dlopen (RTLD_LOCAL) does not offer: reopen it RTLD_GLOBAL first.
    for (const char* lib : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"})
      if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) break;
    int provided = 0;
    check(env, MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    check(env, MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(env, MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &localComm), "MPI_Comm_split_type");
    check(env, MPI_Comm_set_errhandler(localComm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  int rank = 0, size = 1, localRank = 0, localSize = 1, provided = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (localComm != MPI_COMM_NULL) {
    MPI_Comm_rank(localComm, &localRank);
    MPI_Comm_size(localComm, &localSize);
  }
  MPI_Query_thread(&provided);
  char host[MPI_MAX_PROCESSOR_NAME];
  int hostLen = 0;
  MPI_Get_processor_name(host, &hostLen);
  Napi::Object o = Napi::Object::New(env);
  o.Set("rank", rank);
  o.Set("size", size);
  o.Set("localRank", localRank);
  o.Set("localSize", localSize);
  o.Set("host", std::string(host, hostLen));
  o.Set("thread", provided);
  o.Set("library", libraryVersion());
  return o;
}

// library(): the MPI library's version line; MPI allows asking before MPI_Init, so a health check needs no job
Napi::Value Library(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), libraryVersion());
}

// allreduce(buffer, 'sum'|'max'|'min'): request id; the buffer becomes the reduction on every rank
Napi::Value Allreduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireInit(env, "allreduce");
  View v = viewOf(env, info[0], "allreduce");
  MPI_Request r;
  check(env, MPI_Iallreduce(MPI_IN_PLACE, v.data, v.count, v.type, opOf(env, info[1]), MPI_COMM_WORLD, &r), "MPI_Iallreduce");
  return track(env, r, {info[0]});
}

// bcast(buffer, root): request id; every rank's buffer becomes root's
Napi::Value Bcast(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireInit(env, "bcast");
  View v = viewOf(env, info[0], "bcast");
  int root = info[1].As<Napi::Number>().Int32Value();
  MPI_Request r;
  check(env, MPI_Ibcast(v.data, v.count, v.type, root, MPI_COMM_WORLD, &r), "MPI_Ibcast");
  return track(env, r, {info[0]});
}

// allgather(send, recv): request id; recv (size × send's length, same type) holds every rank's send in rank order
Napi::Value Allgather(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireInit(env, "allgather");
  View s = viewOf(env, info[0], "allgather (send)");
  View d = viewOf(env, info[1], "allgather (receive)");
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (s.type != d.type || static_cast<long long>(s.count) * size != d.count)
    throw Napi::RangeError::New(env, "allgather: the receive buffer must have the send buffer's type and world size × its length");
  MPI_Request r;
  check(env, MPI_Iallgather(s.data, s.count, s.type, d.data, s.count, d.type, MPI_COMM_WORLD, &r), "MPI_Iallgather");
  return track(env, r, {info[0], info[1]});
}

// allgatherv(send: Uint8Array, recv: Uint8Array, counts: Int32Array): request id; rank i's bytes land after ranks < i's
Napi::Value Allgatherv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireInit(env, "allgatherv");
  View s = viewOf(env, info[0], "allgatherv (send)");
  View d = viewOf(env, info[1], "allgatherv (receive)");
  View c = viewOf(env, info[2], "allgatherv (counts)");
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (s.type != MPI_UINT8_T || d.type != MPI_UINT8_T || c.type != MPI_INT32_T || c.count != size)
    throw Napi::TypeError::New(env, "allgatherv: expected Uint8Array send and receive buffers and world size Int32Array counts");
  const int* counts = static_cast<const int*>(c.data);
  // the displacements live in a JS array kept with the request: MPI reads them until the collective completes
  Napi::Int32Array displsArray = Napi::Int32Array::New(env, size);
  long long total = 0;
  for (int i = 0; i < size; i++) {
    if (counts[i] < 0 || total > INT32_MAX) throw Napi::RangeError::New(env, "allgatherv: counts must be non-negative and sum below 2^31");
    displsArray[i] = static_cast<int32_t>(total);
    total += counts[i];
  }
  if (total != d.count) throw Napi::RangeError::New(env, "allgatherv: the receive buffer's length must be the sum of the counts");
  MPI_Request r;
  check(env, MPI_Iallgatherv(s.data, s.count, MPI_UINT8_T, d.data, counts, displsArray.Data(), MPI_UINT8_T, MPI_COMM_WORLD, &r),
        "MPI_Iallgatherv");
  return track(env, r, {info[0], info[1], info[2], displsArray});
}

Napi::Value Barrier(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireInit(env, "barrier");
  MPI_Request r;
  check(env, MPI_Ibarrier(MPI_COMM_WORLD, &r), "MPI_Ibarrier");
  return track(env, r, {});
}

// test(id): true once the request is complete (its buffers are then released); throws on an MPI error
Napi::Value Test(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int id = info[0].As<Napi::Number>().Int32Value();
  auto it = pending.find(id);
  if (it == pending.end()) throw Napi::Error::New(env, "test: no pending request " + std::to_string(id));
  int done = 0;
  MPI_Status status;
  int code = MPI_Test(&it->second.request, &done, &status);
  if (code != MPI_SUCCESS) {
    pending.erase(it);
    check(env, code, "MPI_Test");
  }
  if (done) pending.erase(it);
  return Napi::Boolean::New(env, done != 0);
}

Napi::Value Finalize(const Napi::CallbackInfo& info) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) {
    if (localComm != MPI_COMM_NULL) MPI_Comm_free(&localComm);
    pending.clear();
    MPI_Finalize();
  }
  return info.Env().Undefined();
}

Napi::Value Abort(const Napi::CallbackInfo& info) {
  int code = info.Length() > 0 ? info[0].As<Napi::Number>().Int32Value() : 1;
  MPI_Abort(MPI_COMM_WORLD, code);
  return info.Env().Undefined();
}

Napi::Object Module(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New(env, Init));
  exports.Set("library", Napi::Function::New(env, Library));
  exports.Set("allreduce", Napi::Function::New(env, Allreduce));
  exports.Set("bcast", Napi::Function::New(env, Bcast));
  exports.Set("allgather", Napi::Function::New(env, Allgather));
  exports.Set("allgatherv", Napi::Function::New(env, Allgatherv));
  exports.Set("barrier", Napi::Function::New(env, Barrier));
  exports.Set("test", Napi::Function::New(env, Test));
  exports.Set("finalize", Napi::Function::New(env, Finalize));
  exports.Set("abort", Napi::Function::New(env, Abort));
  return exports;
}

}  // namespace

NODE_API_MODULE(rmas_mpi, Module)
