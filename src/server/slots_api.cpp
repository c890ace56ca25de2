// llama-server's slot endpoints (docs/server.md "llama-server's endpoints"):
// GET /slots, POST /slots/ID?action=save|restore|erase, mapped to the
// context store. Each slot keeps the session of the last completion it ran
// (its compressed prompt and answer, as llama-server's slot keeps its
// cache); `save` stores it under the filename (a stored context, so it is
// also a `context_id`), `restore` takes a stored context back into the
// slot, `erase` drops the slot's.
#include <chrono>

#include "engine/engine_impl.h"
#include "kv/cache.h"
#include "server/impl.h"
#include "server/request.h"

namespace kvtrim::server {

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void Server::Impl::KeepSlotSession(int slot, std::shared_ptr<Session> s) {
  std::lock_guard<std::mutex> lk(slots_mu);
  if (slot >= 0 && slot < static_cast<int>(slot_sessions.size())) slot_sessions[slot] = std::move(s);
}

std::shared_ptr<Session> Server::Impl::SlotSession(int slot) const {
  std::lock_guard<std::mutex> lk(slots_mu);
  return slot >= 0 && slot < static_cast<int>(slot_sessions.size()) ? slot_sessions[slot] : nullptr;
}

void Server::Impl::SlotAction(int slot, const std::string& action, const std::string& body, httplib::Response& res) {
  if (slot < 0 || slot >= o.parallel)
    return SendError(res, 400, "no slot " + std::to_string(slot) + " (slots 0 to " + std::to_string(o.parallel - 1) + ")");
  const auto t0 = std::chrono::steady_clock::now();
  const std::shared_ptr<Session> held = SlotSession(slot);
  if (action == "erase") {
    KeepSlotSession(slot, nullptr);
    const int n = held ? static_cast<int>(held->tokens().size()) : 0;
    return res.set_content(Dump(json{{"id_slot", slot}, {"n_erased", n}}), "application/json");
  }
  if (action != "save" && action != "restore")
    return SendError(res, 400, "action '" + action + "' is not one of save, restore, erase");
  auto filename = ParseSlotFilename(body);
  if (!filename.ok()) return SendError(res, 400, filename.error().message);
  const std::string& id = filename.value();
  if (action == "save") {
    if (!held || held->tokens().empty()) return SendError(res, 400, "slot " + std::to_string(slot) + " holds no cache to save");
    auto f = held->Fork(held->kv_options());
    if (!f.ok()) return SendError(res, 500, f.error().message);
    f.value()->impl().UsePool(nullptr);
    auto c = StoredFrom(std::move(f.value()), held->kv_options());
    Status st = store.PutAs(id, c);
    if (!st.ok()) return SendError(res, st.code() == ErrorCode::kUnavailable ? 503 : 400, st.message());
    json out{{"id_slot", slot}, {"filename", id}, {"n_saved", c->tokens}, {"n_written", c->kv_bytes},
             {"timings", {{"save_ms", MsSince(t0)}}}, {"kvtrim", {{"context_id", id}}}};
    return res.set_content(Dump(out), "application/json");
  }
  auto c = store.Get(id);
  if (!c) return SendError(res, 404, "no stored context '" + id + "' to restore");
  auto f = c->session->Fork(c->kv);
  if (!f.ok()) return SendError(res, 500, f.error().message);
  KeepSlotSession(slot, std::shared_ptr<Session>(std::move(f.value())));
  json out{{"id_slot", slot}, {"filename", id}, {"n_restored", c->tokens}, {"n_read", c->kv_bytes},
           {"timings", {{"restore_ms", MsSince(t0)}}}};
  res.set_content(Dump(out), "application/json");
}

json Server::Impl::Slots() const {
  json out = json::array();
  std::lock_guard<std::mutex> lk(slots_mu);
  for (int i = 0; i < o.parallel; ++i) {
    const auto& s = slot_sessions[i];
    json j{{"id", i}, {"n_ctx", Ctx()}, {"n_tokens", s ? static_cast<int64_t>(s->tokens().size()) : 0}};
    if (s) j["kvtrim"] = {{"kv", KvJson(s->kv_options())}, {"kv_bytes", s->impl().cache().BytesUsed()}};
    out.push_back(j);
  }
  return out;
}

}  // namespace kvtrim::server
