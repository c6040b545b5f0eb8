/**
 * The verdict harness of MBPP+ and functional LiveCodeBench tests (docs/faults.md, "Model-written code"). Two Python
 * processes in one sandbox: the verdict host, which reads the secret part (the nonce, the test script or the
 * expected value) from its stdin, makes itself undumpable (so that a process of the same uid can neither read its
 * memory nor open its fds through /proc), and starts the answer host in a fresh interpreter with neither. The answer
 * host runs the answer and calls its functions on request; each result crosses back as tagged JSON (a value, never
 * an object whose `__eq__` the answer wrote), and the verdict host compares it with what the answer never saw. The
 * verdict is one line, `<nonce> pass`, on the verdict host's stdout, which the answer cannot reach (its prints go to
 * stderr): an exit code alone never passes.
 */

/** The answer's process: `python3 -c ANSWER_HOST <request fd> <reply fd>`, the answer in `answer.py`. */
export const ANSWER_HOST = `
import json, operator, os, pickle, struct, sys, traceback
_req = os.fdopen(int(sys.argv[1]), "rb")
_res = os.fdopen(int(sys.argv[2]), "wb")
def _send(msg):
    b = json.dumps(msg).encode()
    _res.write(struct.pack(">I", len(b)) + b)
    _res.flush()
def _enc(v, d=0):
    if d > 200:
        raise ValueError("the result is nested more than 200 deep")
    if v is None or v is True or v is False:
        return v
    t = type(v)
    if isinstance(v, int):
        return int.__index__(v)
    if isinstance(v, float):
        return float.__float__(v)
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, list):
        return [_enc(x, d + 1) for x in list.__iter__(v)]
    if isinstance(v, tuple):
        return {"t": [_enc(x, d + 1) for x in tuple.__iter__(v)]}
    if isinstance(v, frozenset):
        return {"f": [_enc(x, d + 1) for x in frozenset.__iter__(v)]}
    if isinstance(v, set):
        return {"s": [_enc(x, d + 1) for x in set.__iter__(v)]}
    if isinstance(v, dict):
        return {"d": [[_enc(k, d + 1), _enc(x, d + 1)] for k, x in dict.items(v)]}
    if isinstance(v, (bytes, bytearray)):
        return {"b": bytes(v).hex()}
    if isinstance(v, complex):
        return {"c": [complex.real.__get__(v), complex.imag.__get__(v)]}
    if isinstance(v, range):
        return {"r": [v.start, v.stop, v.step]}
    if hasattr(t, "tolist"):
        return _enc(v.tolist(), d + 1)
    if hasattr(t, "__next__") and hasattr(t, "__iter__"):  # map, filter, a generator: still an iterator over there
        return {"i": [_enc(x, d + 1) for x in v]}
    raise TypeError("the answer returned a %s, which the harness cannot compare" % t.__name__)
def _tb(e):
    try:
        return "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip()
    except BaseException:
        return "an exception that cannot be shown"
_ns = {"__name__": "__main__"}
exec(_PRELUDE, _ns)
_base = dict(_ns)
try:
    with open("answer.py", encoding="utf-8") as _f:
        exec(compile(_f.read(), "answer.py", "exec"), _ns)
except BaseException as e:
    _send(["err", _tb(e)])
    sys.exit(1)
# what the answer defined, names it took from the prelude (operator's add) included
_send(["names", [k for k, v in _ns.items() if (k not in _base or v is not _base[k]) and callable(v)]])
while True:
    _h = _req.read(4)
    if len(_h) < 4:
        break
    _name, _args, _kwargs = pickle.loads(_req.read(struct.unpack(">I", _h)[0]))
    try:
        if _name.startswith("lcb:"):
            _S = _ns.get("Solution")
            _fn = getattr(_S(), _name[4:]) if isinstance(_S, type) else _ns[_name[4:]]
        else:
            _fn = _ns[_name]
        _out = ["ok", _enc(_fn(*_args, **_kwargs))]
    except BaseException as e:
        _out = ["err", _tb(e)]
    _send(_out)
`;

/** The verdict's process: `python3 -c VERDICT_HOST` with the spec (JSON) on stdin; prints `<nonce> pass|fail …|error`. */
export const VERDICT_HOST = `
import ctypes, json, os, pickle, struct, subprocess, sys, traceback
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
spec = json.loads(sys.stdin.read())
sys.stdin.close()
nonce = spec.pop("nonce")
verdict = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
class AnswerError(Exception):
    pass
req_r, req_w = os.pipe()
res_r, res_w = os.pipe()
host = "_PRELUDE = " + repr(spec["prelude"]) + "\\n" + spec["host"]
child = subprocess.Popen([sys.executable, "-c", host, str(req_r), str(res_w)], stdin=subprocess.DEVNULL,
                         stdout=2, stderr=2, pass_fds=(req_r, res_w))
os.close(req_r)
os.close(res_w)
req = os.fdopen(req_w, "wb")
res = os.fdopen(res_r, "rb")
def dec(o):
    if len(o) == 1:
        (k, v), = o.items()
        if k == "t": return tuple(v)
        if k == "s": return set(v)
        if k == "f": return frozenset(v)
        if k == "d": return {a: b for a, b in v}
        if k == "b": return bytes.fromhex(v)
        if k == "c": return complex(v[0], v[1])
        if k == "r": return range(v[0], v[1], v[2])
        if k == "i": return iter(v)
    raise ValueError("a malformed reply from the answer's process")
def recv():
    h = res.read(4)
    n = struct.unpack(">I", h)[0] if len(h) == 4 else -1
    if n < 0 or n > 256 << 20:
        try:
            code = child.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = "none, still running"
        raise AnswerError("the answer's process ended (exit code %s) without replying" % code)
    kind, value = json.loads(res.read(n), object_hook=dec)
    if kind == "err":
        raise AnswerError(value)
    return value
def call(name, args, kwargs):
    b = pickle.dumps((name, list(args), dict(kwargs)))
    req.write(struct.pack(">I", len(b)) + b)
    req.flush()
    return recv()
def proxy(name):
    return lambda *args, **kwargs: call(name, args, kwargs)
line = "error"
try:
    names = recv()
    if spec["kind"] == "mbpp":
        ns = {"__name__": "__main__"}
        exec(spec["prelude"], ns)
        for n in names:
            ns[n] = proxy(n)
        exec(compile(spec["test"], "test.py", "exec"), ns)
        line = "pass"
    else:
        args = [json.loads(a) for a in spec["input"].split("\\n") if a.strip()]
        expected = json.loads(spec["output"])
        got = call("lcb:" + spec["fn_name"], args, {})
        if isinstance(got, tuple):
            got = list(got)
        line = "pass" if got == expected else "fail " + repr(got)[:200]
except AnswerError as e:
    print(e, file=sys.stderr)  # the answer's own traceback, without the harness's frames
except BaseException:
    traceback.print_exc()
child.kill()
verdict.write(nonce + " " + line + "\\n")
verdict.flush()
sys.exit(0 if line == "pass" else 1)
`;
