"""A scripted model endpoint for the agent acceptance tests: real agent CLIs (codex,
claude) talk to it over HTTPS as if it were their provider, and it makes them run one
shell command, write one file, then finish.

It speaks just enough of two streaming APIs, learned from the agents' own sources:

  OpenAI Responses (codex):  POST .../responses with "stream": true. Answered with SSE
      events `response.created`, `response.output_item.added` / `.done` (a `message`, a
      `function_call` for the shell tool, or a `custom_tool_call` for apply_patch), and
      `response.completed` carrying the response id and usage. codex reads only these.
  Anthropic Messages (claude): POST /v1/messages, "stream": true answered with the SSE
      sequence message_start, content_block_start / content_block_delta (text_delta or
      input_json_delta) / content_block_stop, message_delta (stop_reason), message_stop;
      "stream": false with one JSON message. Side requests without tools (titles, quota
      probes) get a short text answer.

Stateless: the step to take is the number of tool results already in the conversation
the agent sends back (function_call_output items; tool_result blocks), so retries and
parallel side requests do not confuse it. A step is ("shell", COMMAND) or
("write", PATH, TEXT) or ("done", TEXT).

Every request is recorded in .requests: (method, path, headers dict lower-cased, parsed
JSON body or None). A request without the expected key (Authorization: Bearer KEY for
OpenAI, x-api-key: KEY or Bearer for Anthropic) is answered 401 and recorded.

The listening socket is made by the caller inside the lab's "internet" namespace
(netns.listen_in); each connection is handled on its own thread, TLS handshake included.
"""

import json
import socket
import ssl
import threading
import time

from labtools import servers

BODY_MAX = 8 * 1024 * 1024

# The scenarios of the acceptance tests. The shell command and the file are chosen so a
# test can find both: the command's output lands in the agent's transcript, the file in
# the candidate diff.
SCENARIOS = {
    "edit": [
        ("shell", "cat README.md"),
        ("write", "NOTES.md", "Written by the agent under egress-exec.\n"),
        ("done", "Done: read README.md and wrote NOTES.md."),
    ],
    "escape": [
        ("shell", "curl -sS -m 10 -o /dev/null -w 'status %{http_code}\\n' "
                  "https://origin2.lab.test/ ; echo curl-exit $?"),
        ("write", "CHANGELOG.md", "An edit nobody granted.\n"),
        ("done", "Done: tried an ungranted fetch and an out-of-scope write."),
    ],
}


def _tool_names_openai(body):
    names = {}
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        name = t.get("name") or t.get("type")
        if name:
            names[name] = t.get("type")
    return names


def _count_openai_results(body):
    n = 0
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") in (
                "function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            n += 1
    return n


def _count_anthropic_results(body):
    n = 0
    for m in body.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            n += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def _sh_quote(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


def _write_command(path, text):
    return "printf '%%s' %s > %s" % (_sh_quote(text), _sh_quote(path))


class ModelServer(servers.Server):
    def __init__(self, sock, certfile, keyfile, scenario, api_key):
        super().__init__(sock)
        self.ctx = servers.tls_server_context(certfile, keyfile)
        self.scenario = SCENARIOS[scenario] if isinstance(scenario, str) else list(scenario)
        self.api_key = api_key
        self.requests = []
        self.errors = []
        self._lock = threading.Lock()
        self._seq = 0

    # --- life cycle (start, stop: servers.Server) ----------------------------------------

    def set_scenario(self, scenario):
        self.scenario = SCENARIOS[scenario] if isinstance(scenario, str) else list(scenario)

    def model_calls(self):
        """Requests that were model turns (POST to a responses or messages endpoint)."""
        with self._lock:
            return [r for r in self.requests if r[0] == "POST" and
                    (r[1].split("?")[0].endswith("/responses") or
                     r[1].split("?")[0].endswith("/messages"))]

    def _next_id(self, prefix):
        with self._lock:
            self._seq += 1
            return "%s_lab%06d" % (prefix, self._seq)

    # --- HTTP/1.1 over TLS -------------------------------------------------------------

    def _conn(self, raw):
        try:
            raw.settimeout(30)
            try:
                c = self.ctx.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError) as e:
                self.errors.append("handshake: %s" % e)
                raw.close()
                return
            buf = b""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not self._stop.is_set():
                head, buf = servers.read_head(c, buf)
                if head is None:
                    return
                lines = head[:-4].decode("latin-1").split("\r\n")
                method, target, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = b""
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body, buf = servers.read_chunked(c, buf, BODY_MAX)
                else:
                    n = int(headers.get("content-length", "0") or "0")
                    if n > BODY_MAX:
                        return
                    buf = servers.recv_more(c, buf, n)
                    body, buf = buf[:n], buf[n:]
                keep = self._handle(c, method, target, headers, body)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (OSError, ValueError) as e:
            self.errors.append("connection: %s" % e)
        finally:
            try:
                raw.close()
            except OSError:
                pass

    def _send(self, c, status, reason, ctype, body, extra=()):
        head = ["HTTP/1.1 %d %s" % (status, reason), "Content-Type: " + ctype,
                "Content-Length: %d" % len(body)] + list(extra)
        c.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    def _send_json(self, c, status, obj, reason="OK"):
        self._send(c, status, reason, "application/json", json.dumps(obj).encode())

    def _sse_start(self, c):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n")

    @staticmethod
    def _sse(c, event, data):
        c.sendall(("event: %s\ndata: %s\n\n" % (event, json.dumps(data))).encode())

    def _authorized(self, headers):
        want = self.api_key
        if want is None:
            return True
        return headers.get("authorization") == "Bearer " + want or \
            headers.get("x-api-key") == want

    def _handle(self, c, method, target, headers, body):
        parsed = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        with self._lock:
            self.requests.append((method, target, headers, parsed))
        path = target.split("?")[0]
        if not self._authorized(headers):
            self._send_json(c, 401, {"error": {"type": "authentication_error",
                                               "message": "lab model: wrong key"}},
                            "Unauthorized")
            return True
        if method == "POST" and path.endswith("/responses") and isinstance(parsed, dict):
            self._openai(c, parsed)
            return False
        if method == "POST" and path.endswith("/messages/count_tokens"):
            self._send_json(c, 200, {"input_tokens": 10})
            return True
        if method == "POST" and path.endswith("/messages") and isinstance(parsed, dict):
            return self._anthropic(c, parsed)
        if method == "GET" and path.endswith("/models"):
            self._send_json(c, 200, {"object": "list", "data": [], "models": []})
            return True
        self._send_json(c, 404, {"error": {"message": "lab model: no such endpoint %s"
                                           % path}}, "Not Found")
        return True

    def _step(self, n):
        if n < len(self.scenario):
            return self.scenario[n]
        return ("done", "Done.")

    # --- OpenAI Responses --------------------------------------------------------------

    def _openai(self, c, body):
        step = self._step(_count_openai_results(body))
        tools = _tool_names_openai(body)
        rid = self._next_id("resp")
        item = None
        if step[0] == "write" and "apply_patch" in tools:
            patch = "*** Begin Patch\n*** Add File: %s\n%s*** End Patch\n" % (
                step[1], "".join("+" + ln + "\n" for ln in step[2].splitlines()))
            if tools["apply_patch"] == "custom":
                item = {"type": "custom_tool_call", "call_id": self._next_id("call"),
                        "name": "apply_patch", "input": patch, "status": "completed"}
            else:
                item = {"type": "function_call", "call_id": self._next_id("call"),
                        "name": "apply_patch", "arguments": json.dumps({"input": patch})}
            step = ("tool",)
        elif step[0] in ("shell", "write"):
            cmd = step[1] if step[0] == "shell" else _write_command(step[1], step[2])
            if "shell_command" in tools:
                item = {"type": "function_call", "name": "shell_command",
                        "arguments": json.dumps({"command": cmd}),
                        "call_id": self._next_id("call")}
            elif "exec_command" in tools:
                item = {"type": "function_call", "name": "exec_command",
                        "arguments": json.dumps({"cmd": cmd}),
                        "call_id": self._next_id("call")}
            elif "shell" in tools:
                item = {"type": "function_call", "name": "shell",
                        "arguments": json.dumps({"command": ["bash", "-lc", cmd]}),
                        "call_id": self._next_id("call")}
            elif "local_shell" in tools:
                item = {"type": "local_shell_call", "call_id": self._next_id("call"),
                        "status": "completed",
                        "action": {"type": "exec", "command": ["bash", "-lc", cmd]}}
            else:
                self.errors.append("codex offered no shell tool: %s" % sorted(tools))
                step = ("done", "No shell tool was offered.")
        if item is not None:
            item.setdefault("id", self._next_id("fc"))
        self._sse_start(c)
        self._sse(c, "response.created", {"type": "response.created",
                                          "response": {"id": rid}})
        if item is None:
            msg = {"type": "message", "role": "assistant", "id": self._next_id("msg"),
                   "content": [{"type": "output_text", "text": step[1]}]}
            self._sse(c, "response.output_item.added",
                      {"type": "response.output_item.added", "output_index": 0, "item": msg})
            self._sse(c, "response.output_text.delta",
                      {"type": "response.output_text.delta", "delta": step[1],
                       "output_index": 0, "content_index": 0, "item_id": msg["id"]})
            self._sse(c, "response.output_item.done",
                      {"type": "response.output_item.done", "output_index": 0, "item": msg})
        else:
            self._sse(c, "response.output_item.added",
                      {"type": "response.output_item.added", "output_index": 0,
                       "item": item})
            self._sse(c, "response.output_item.done",
                      {"type": "response.output_item.done", "output_index": 0, "item": item})
        self._sse(c, "response.completed", {
            "type": "response.completed",
            "response": {"id": rid, "usage": {
                "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15}}})

    # --- Anthropic Messages ------------------------------------------------------------

    def _anthropic(self, c, body):
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        model = body.get("model") or "lab-model"
        if "Bash" not in tools:
            # a side request (title, summary, quota probe): plain text
            blocks = [{"type": "text", "text": "lab"}]
            stop = "end_turn"
        else:
            step = self._step(_count_anthropic_results(body))
            if step[0] == "shell":
                blocks = [{"type": "tool_use", "id": self._next_id("toolu"), "name": "Bash",
                           "input": {"command": step[1], "description": "lab step"}}]
                stop = "tool_use"
            elif step[0] == "write" and "Write" in tools:
                blocks = [{"type": "tool_use", "id": self._next_id("toolu"), "name": "Write",
                           "input": {"file_path": step[1], "content": step[2]}}]
                stop = "tool_use"
            elif step[0] == "write":
                blocks = [{"type": "tool_use", "id": self._next_id("toolu"), "name": "Bash",
                           "input": {"command": _write_command(step[1], step[2]),
                                     "description": "lab step"}}]
                stop = "tool_use"
            else:
                blocks = [{"type": "text", "text": step[1]}]
                stop = "end_turn"
        mid = self._next_id("msg")
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if not body.get("stream"):
            self._send_json(c, 200, {"id": mid, "type": "message", "role": "assistant",
                                     "model": model, "content": blocks, "stop_reason": stop,
                                     "stop_sequence": None, "usage": usage})
            return True
        self._sse_start(c)
        self._sse(c, "message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                self._sse(c, "content_block_start", {"type": "content_block_start",
                                                     "index": i, "content_block":
                                                     {"type": "text", "text": ""}})
                self._sse(c, "content_block_delta", {"type": "content_block_delta",
                                                     "index": i, "delta":
                                                     {"type": "text_delta",
                                                      "text": b["text"]}})
            else:
                self._sse(c, "content_block_start", {"type": "content_block_start",
                                                     "index": i, "content_block":
                                                     {"type": "tool_use", "id": b["id"],
                                                      "name": b["name"], "input": {}}})
                self._sse(c, "content_block_delta", {"type": "content_block_delta",
                                                     "index": i, "delta":
                                                     {"type": "input_json_delta",
                                                      "partial_json": json.dumps(b["input"])}})
            self._sse(c, "content_block_stop", {"type": "content_block_stop", "index": i})
        self._sse(c, "message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": stop, "stop_sequence": None},
                                       "usage": {"output_tokens": 5}})
        self._sse(c, "message_stop", {"type": "message_stop"})
        return False


def main():
    """Standalone, for trying an agent by hand: from integration/, python3 -m
    labtools.modelserver ADDR PORT CERT KEY SCENARIO [KEY]. Prints each request line."""
    import sys
    addr, port, cert, key, scen = sys.argv[1:6]
    api_key = sys.argv[6] if len(sys.argv) > 6 else None
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    s.listen(64)
    m = ModelServer(s, cert, key, scen, api_key).start()
    seen = 0
    try:
        while True:
            time.sleep(0.2)
            with m._lock:
                new = m.requests[seen:]
                seen = len(m.requests)
            for r in new:
                print(r[0], r[1], json.dumps(r[3])[:4000] if r[3] is not None else "",
                      flush=True)
            for e in m.errors:
                print("ERROR", e, flush=True)
            m.errors.clear()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
