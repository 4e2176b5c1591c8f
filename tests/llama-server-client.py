#!/usr/bin/env python3
"""llama-server-client.py - the HTTP side of tests/llama-server.sh.

    llama-server-client.py BASE-URL COMMAND [ARGS]

Commands (each exits 0 on success, 1 with a reason on stderr):
  health                 GET /health answers 200 {"status": "ok"}
  complete OUT           POST /completion: 16 greedy tokens from a fixed
                         prompt (byte tokens banned, as for chat), their
                         ids and the top-2 probabilities of each step,
                         saved as JSON in OUT
  stream OUT             the same request streamed (server-sent events):
                         the ids gathered from the events saved in OUT
  chat OUT               POST /v1/chat/completions, greedy, with the byte
                         tokens banned (logit_bias) so that the text is
                         printable; the message saved in OUT
  fails                  POST /completion fails (an HTTP error, or the
                         connection refused or cut) within 120 s; a
                         request that hangs until then fails the check
  same A B               (no server) the token ids of two `complete`
                         outputs are equal, or equal up to a step where
                         A's two best tokens were a near tie (their
                         log-probabilities within 0.02) and B took A's
                         second
The standard library only: no third-party module.
"""
import json
import math
import sys
import urllib.error
import urllib.request

PROMPT = "the city of"
VOCAB = 320  # the tiny preset's
N = 16
# tests/make-llama-gguf's vocabulary: <unk> <s> </s>, then 256 byte tokens
BYTE_TOKENS = range(3, 3 + 256)


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


# The server refuses output that is not UTF-8, which a random model's byte
# tokens make: they are banned, so that every answer is printable text.
NO_BYTES = {str(t): False for t in BYTE_TOKENS}


def completion_body(stream):
    return {"prompt": PROMPT, "n_predict": N, "temperature": 0, "top_k": 1,
            "ignore_eos": True, "cache_prompt": False, "n_probs": VOCAB,
            "return_tokens": True, "stream": stream, "logit_bias": NO_BYTES}


def steps(probs):
    """[(id, [(id, p), (id, p)]), ...] from completion_probabilities: the
    two most probable tokens of each step that were not banned (the
    server gives the probabilities before sampling, as logarithms, over
    the whole vocabulary: n_probs is its size)."""
    out = []
    for step in probs:
        top = [(t["id"], math.exp(t["logprob"])) for t in step.get("top_logprobs", [])
               if t["id"] not in BYTE_TOKENS]
        top.sort(key=lambda t: -t[1])
        out.append((step["id"], top[:2]))
    return out


def same(a, b):
    a, b = json.load(open(a)), json.load(open(b))
    for i, (x, y) in enumerate(zip(a["tokens"], b["tokens"])):
        if x == y:
            continue
        top = a["steps"][i][1] if i < len(a["steps"]) else []
        if len(top) == 2 and top[1][0] == y and math.log(top[0][1] / top[1][1]) <= 0.02:
            print("equal for %d tokens, then a near tie (%.4f, %.4f)" % (i, top[0][1], top[1][1]))
            return
        sys.exit("token %d: %d against %d, A's best two %s" % (i, x, y, top))
    print("equal: %d tokens" % len(a["tokens"]))


def main():
    base, cmd = sys.argv[1], sys.argv[2]
    if base == "-" and cmd == "same":
        same(sys.argv[3], sys.argv[4])
        return
    if cmd == "health":
        with urllib.request.urlopen(base + "/health", timeout=10) as r:
            body = json.load(r)
            if r.status != 200 or body.get("status") != "ok":
                sys.exit("health: %d %s" % (r.status, body))
        return
    if cmd == "complete":
        with post(base + "/completion", completion_body(False)) as r:
            body = json.load(r)
        tokens = body.get("tokens", [])
        if len(tokens) != N:
            sys.exit("complete: %d tokens, not %d: %s" % (len(tokens), N, body))
        json.dump({"tokens": tokens, "steps": steps(body.get("completion_probabilities", [])),
                   "content": body.get("content", "")}, open(sys.argv[3], "w"))
        return
    if cmd == "stream":
        tokens, events = [], 0
        with post(base + "/completion", completion_body(True)) as r:
            if "text/event-stream" not in r.headers.get("Content-Type", ""):
                sys.exit("stream: Content-Type %s" % r.headers.get("Content-Type"))
            for line in r:
                line = line.decode().strip()
                if not line.startswith("data: "):
                    continue
                ev = json.loads(line[6:])
                events += 1
                tokens += ev.get("tokens", [])
                if ev.get("stop"):
                    break
        if len(tokens) != N or events < N:
            sys.exit("stream: %d tokens in %d events" % (len(tokens), events))
        json.dump({"tokens": tokens, "events": events}, open(sys.argv[3], "w"))
        return
    if cmd == "chat":
        body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": N,
                "temperature": 0, "top_k": 1,
                "logit_bias": NO_BYTES}
        with post(base + "/v1/chat/completions", body) as r:
            out = json.load(r)
        msg = out["choices"][0]["message"]
        text = msg.get("content") or ""
        if msg.get("role") != "assistant" or not text or not text.isprintable():
            sys.exit("chat: %r" % (out,))
        json.dump({"content": text, "usage": out.get("usage")}, open(sys.argv[3], "w"))
        return
    if cmd == "fails":
        try:
            with post(base + "/completion", completion_body(False)) as r:
                body = r.read()
            sys.exit("fails: it answered %d: %s" % (r.status, body[:200]))
        except urllib.error.HTTPError as e:
            print("HTTP %d: %s" % (e.code, e.read()[:200].decode(errors="replace")))
        except TimeoutError:
            sys.exit("fails: no answer in 120 s (it hangs)")
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                sys.exit("fails: no answer in 120 s (it hangs)")
            print("connection: %s" % (e.reason,))
        except (ConnectionError, OSError) as e:
            print("connection: %s" % (e,))
        return
    sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
