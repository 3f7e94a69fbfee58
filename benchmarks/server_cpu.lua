-- wrk script of benchmarks/server_cpu.py: POSTs of one pre-built JSON-RPC tools/call, checked.
--
--   wrk -t N -c N -d 5s -s server_cpu.lua URL -- ERA TOOL ARGUMENTS EXPECT [SESSION-ID ...]
--
-- ERA: "modern" (2026-07-28: no session, _meta and the routing headers on every request) or
-- "legacy" (2025-11-25: thread i sends session i's Mcp-Session-Id). Each request has an id of
-- its own (a session maps answers to requests by id). An answer counts as an error unless it is
-- HTTP 200, contains EXPECT, and is not an isError result; done() prints one JSON line.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

local counter = 0
local prefix, suffix, headers
errors = 0
first_error = ""

function init(args)
  local era, tool, arguments = args[1], args[2], args[3]
  expect = args[4]
  headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
  }
  local meta = ""
  if era == "modern" then
    headers["MCP-Protocol-Version"] = "2026-07-28"
    headers["Mcp-Method"] = "tools/call"
    headers["Mcp-Name"] = tool
    meta = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
      .. '"io.modelcontextprotocol/clientInfo":{"name":"server_cpu","version":"1.0"},'
      .. '"io.modelcontextprotocol/clientCapabilities":{}}'
  else
    headers["MCP-Protocol-Version"] = "2025-11-25"
    headers["Mcp-Session-Id"] = args[4 + tid]
  end
  prefix = '{"jsonrpc":"2.0","id":'
  suffix = ',"method":"tools/call","params":{"name":"' .. tool .. '","arguments":' .. arguments .. meta .. '}}'
end

function request()
  counter = counter + 1
  return wrk.format("POST", nil, headers, prefix .. (tid * 100000000 + counter) .. suffix)
end

function response(status, hdrs, body)
  if status ~= 200 or not string.find(body, expect, 1, true) or string.find(body, '"isError":true', 1, true) then
    errors = errors + 1
    if first_error == "" then
      first_error = status .. " " .. string.sub(body, 1, 300)
    end
  end
end

local function quote(s)
  return '"' .. string.gsub(string.gsub(s, '[\\"]', '\\%0'), '[%c]', ' ') .. '"'
end

function done(summary, latency, requests)
  local errs, first = 0, ""
  for _, thread in ipairs(threads) do
    errs = errs + thread:get("errors")
    if first == "" then first = thread:get("first_error") end
  end
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":%d,"http_errors":%d,"p50_us":%d,"p99_us":%d,"first_error":%s}\n',
    summary.requests, summary.duration, errs,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), quote(first)))
end
