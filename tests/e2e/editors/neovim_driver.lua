-- Drives headless Neovim (0.7+) against promptls for tests/e2e/test_neovim.py.
--
-- Run as `nvim --headless --clean -n -c 'luafile neovim_driver.lua' -c 'cquit 3'` (the cquit
-- only runs if this file fails to load) with the environment:
--   PROMPTLS_CMD   JSON list: the server command
--   CONV_FILE      a conversation to open, diagnose and hover
--   FIX_FILE       a conversation with one fixable finding (edited in the buffer, not saved)
--   OUT            where the JSON result goes
--   PROMPTLS_INIT  README's "Neovim 0.7+" snippet: an autocmd that starts one client per
--                  root and attaches every matching buffer
-- Every wait is bounded.
-- The JSON holds what the editor saw (and each part's error); the pytest side asserts.

local t0 = vim.loop.hrtime()
local function ms()
  return math.floor((vim.loop.hrtime() - t0) / 1e6)
end
local out = { timings = {}, steps = {} }
local function step(name)
  table.insert(out.steps, name)
  out.timings[name] = ms()
end
local function finish()
  vim.fn.writefile({ vim.fn.json_encode(out) }, os.getenv("OUT"))
  vim.cmd("qall!")
end

-- README's "Neovim 0.7+" snippet, run as it stands; the only change is the server command
-- (and an on_exit to see how each server ends), made by wrapping vim.lsp.start_client.
local cmd = vim.fn.json_decode(os.getenv("PROMPTLS_CMD"))
local clients = {} -- every client the snippet started
out.server_exit = {}
local start_client = vim.lsp.start_client
vim.lsp.start_client = function(config)
  out.readme_cmd = config.cmd
  config.cmd = cmd
  config.on_exit = function(code, signal)
    table.insert(out.server_exit, { code, signal })
  end
  local id = start_client(config)
  table.insert(clients, id)
  return id
end
dofile(os.getenv("PROMPTLS_INIT"))

local function wait(what, secs, pred)
  if not vim.wait(secs * 1000, pred, 20) then
    error("timed out after " .. secs .. " s waiting for " .. what)
  end
end

local function client_of(bufnr)
  local ids = vim.tbl_keys(vim.lsp.buf_get_clients(bufnr))
  assert(#ids == 1, "expected one client on buffer " .. bufnr .. ", got " .. #ids)
  return vim.lsp.get_client_by_id(ids[1])
end

local function open(file)
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  wait("the client to attach", 10, function()
    return next(vim.lsp.buf_get_clients(bufnr)) ~= nil or #out.server_exit > 0
  end)
  assert(#out.server_exit == 0, "the server exited: " .. vim.inspect(out.server_exit))
  local client = client_of(bufnr)
  wait("initialize", 15, function()
    return client.initialized
  end)
  return bufnr, client
end

local function diagnostics(bufnr)
  local res = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    -- lnum/col are 0-based byte columns; user_data.lsp keeps the server's code and data.
    table.insert(res, {
      code = d.code,
      severity = d.severity,
      message = d.message,
      lnum = d.lnum,
      col = d.col,
      end_lnum = d.end_lnum,
      end_col = d.end_col,
    })
  end
  table.sort(res, function(a, b)
    return a.code < b.code
  end)
  return res
end

local function request(bufnr, client, method, params)
  assert(client.supports_method(method), "promptls does not offer " .. method)
  local res, err = vim.lsp.buf_request_sync(bufnr, method, params, 10000)
  assert(res, method .. " failed: " .. tostring(err))
  local r = res[client.id]
  assert(r, method .. ": no answer from promptls")
  assert(not r.err, method .. " answered an error: " .. vim.inspect(r.err))
  return r.result
end

-- Each part runs on its own, so a failing hover does not hide the quick fix; out.errors
-- maps a part to its error.
out.errors = {}
local function part(name, fn)
  local ok, err = pcall(fn)
  if not ok then
    out.errors[name] = tostring(err)
  end
end

-- 1. An example conversation: diagnostics at the right places.
local conv, client
part("diagnostics", function()
  conv, client = open(os.getenv("CONV_FILE"))
  step("initialized")
  out.offset_encoding = client.offset_encoding
  out.filetype = vim.bo[conv].filetype
  wait("diagnostics", 20, function()
    return #vim.diagnostic.get(conv) > 0
  end)
  step("diagnostics")
  out.diagnostics = diagnostics(conv)
end)

-- 2. Hover on the document head: the raw answer, and what vim.lsp.buf.hover() shows.
part("hover", function()
  assert(client, "no client")
  vim.api.nvim_set_current_buf(conv)
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  out.hover = request(conv, client, "textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(conv) },
    position = { line = 0, character = 0 },
  })
  step("hover")
  vim.lsp.buf.hover()
  local float
  wait("the hover window", 10, function()
    for _, win in ipairs(vim.api.nvim_list_wins()) do
      if vim.api.nvim_win_get_config(win).relative ~= "" then
        float = win
        return true
      end
    end
    return false
  end)
  out.hover_window = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(float), 0, -1, false)
  vim.api.nvim_win_close(float, true)
  step("hover_window")
end)

-- 3. A quick fix: ask for code actions the way 0.7's vim.lsp.buf.code_action() does
-- (cursor range, the line's diagnostics), apply the first quick fix, see the finding go.
part("quick_fix", function()
  local fix, fix_client = open(os.getenv("FIX_FILE"))
  wait("diagnostics of the fix document", 20, function()
    return #vim.diagnostic.get(fix) > 0
  end)
  out.fix_diagnostics = diagnostics(fix)
  local d = vim.diagnostic.get(fix)[1]
  vim.api.nvim_win_set_cursor(0, { d.lnum + 1, d.col })
  local params = vim.lsp.util.make_range_params()
  params.context = { diagnostics = vim.lsp.diagnostic.get_line_diagnostics(fix) }
  local actions = request(fix, fix_client, "textDocument/codeAction", params)
  assert(actions and #actions > 0, "no code actions at the diagnostic")
  out.code_actions = {}
  local chosen
  for _, a in ipairs(actions) do
    table.insert(out.code_actions, { title = a.title, kind = a.kind })
    if not chosen and a.kind == "quickfix" then
      chosen = a
    end
  end
  assert(chosen, "no quickfix among the code actions")
  step("code_actions")
  local version = vim.api.nvim_buf_get_changedtick(fix)
  vim.lsp.util.apply_workspace_edit(chosen.edit, fix_client.offset_encoding)
  assert(vim.api.nvim_buf_get_changedtick(fix) > version, "the edit did not change the buffer")
  out.fixed_lines = vim.api.nvim_buf_get_lines(fix, 0, -1, false)
  wait("the finding to go", 20, function()
    return #vim.diagnostic.get(fix) == 0
  end)
  step("fixed")
end)

-- 4. Shut down: every server exits.
part("exit", function()
  local n = #clients
  vim.lsp.stop_client(clients)
  wait("the servers to exit", 10, function()
    return #out.server_exit == n
  end)
  step("exited")
end)
finish()
