// The conversation routes (POST/GET /v1/conversations, GET/DELETE
// /v1/conversations/ID) and a chat turn's planning and ending
// (docs/server.md "Conversations").
#include "engine/engine_impl.h"
#include "server/generation.h"
#include "server/impl.h"

namespace kvtrim::server {

Expected<std::unique_ptr<Conversation>> Server::Impl::NewConversation(const KvOverrides& kv_fields) {
  auto kv = ResolveKv(o.kv, kv_fields);
  if (!kv.ok()) return kv.error();
  SessionOptions so;
  so.ctx = o.ctx;
  so.kv = kv.value();
  return Conversation::Create(engine, so);
}

Expected<std::unique_ptr<Conversation>> Server::Impl::LoadConversation(const std::string& bytes,
                                                                      const std::string& name) {
  SessionOptions so;
  so.ctx = o.ctx;
  return Conversation::Load(engine, bytes, name, so);
}

Expected<Server::Impl::TurnPlan> Server::Impl::PlanTurn(const CompletionRequest& r, int* status) {
  auto fail = [status](int code, const std::string& m) {
    *status = code;
    return MakeError(m);
  };
  auto found = convs.Find(r.conversation);
  if (!found.ok()) return fail(503, "conversation store: " + found.error().message);
  std::shared_ptr<ConversationEntry> e = found.value();
  if (!e) {  // created on first use, with the request's KV fields
    auto c = NewConversation(r.kv);
    if (!c.ok()) return fail(400, c.error().message);
    auto made = convs.Create(r.conversation, std::move(c.value()));
    if (!made.ok()) {
      auto again = convs.Find(r.conversation);  // another request created it meanwhile
      if (!again.ok() || !again.value())
        return fail(503, (convs.durable() ? "conversation store: " : "") + made.error().message);
      e = again.value();
    } else {
      e = made.value();
    }
  } else if (r.kv.any()) {
    return fail(400, "KV fields cannot be given for the existing conversation '" + r.conversation +
                         "': it keeps the KV options it was created with");
  }
  TurnPlan plan;
  plan.turn = std::make_shared<ConversationTurn>(e);  // waits for the turns that arrived first
  if (e->erased) return fail(404, "conversation '" + r.conversation + "' was deleted");
  if (!e->conv) {
    Status st = convs.Reload(*e);
    if (!st.ok()) return fail(503, st.message());
  }
  plan.added = e->conv->NewMessages(r.messages);
  auto tokens = e->conv->TurnTokens(plan.added);
  if (!tokens.ok()) return fail(400, tokens.error().message);
  plan.tokens = std::move(tokens.value());
  return plan;
}

Status Server::Impl::FinishTurn(ConversationTurn& t, const Generation& g) {
  ConversationEntry& e = t.entry();
  e.conv->EndTurn(g.text, g.tokens);
  Status st = convs.Save(e);
  if (!st.ok()) {  // not acknowledged: the next turn starts from what the store holds
    (void)convs.Reload(e);
    return MakeError("the turn was not stored: " + st.message());
  }
  return {};
}

void Server::Impl::FailTurn(ConversationTurn& t) { (void)convs.Reload(t.entry()); }

void Server::Impl::ConversationRoutes() {
  http.Post("/v1/conversations", WithBody([this](const std::string& body, httplib::Response& res) {
    auto r = ParseConversationRequest(body);
    if (!r.ok()) return SendError(res, 400, r.error().message);
    auto c = NewConversation(r->kv);
    if (!c.ok()) return SendError(res, 400, c.error().message);
    auto e = convs.Create(r->id, std::move(c.value()));
    if (!e.ok()) {
      const bool taken = e.error().message.find("exists") != std::string::npos;
      return SendError(res, e.error().code == ErrorCode::kUnavailable ? 503 : taken ? 409 : 400, e.error().message);
    }
    std::lock_guard<std::mutex> lk(e.value()->info_mu);
    res.set_content(Dump(e.value()->info), "application/json");
  }));
  http.Get("/v1/conversations", [this](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    for (const auto& id : convs.Ids()) data.push_back({{"id", id}, {"object", "conversation"}});
    res.set_content(Dump(json{{"object", "list"}, {"data", data}, {"in_memory", convs.size()}}), "application/json");
  });
  http.Get(R"(/v1/conversations/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    auto e = convs.Find(id);
    if (!e.ok()) return SendError(res, 503, "conversation store: " + e.error().message);
    if (!e.value()) return SendError(res, 404, "no conversation '" + id + "'");
    // The messages are read by a turn of its own, after those under way.
    ConversationTurn turn(e.value());
    if (!turn.entry().conv && !convs.Reload(turn.entry()).ok())
      return SendError(res, 503, "conversation '" + id + "' cannot be read from the store");
    res.set_content(Dump(ConversationJson(id, *turn.entry().conv, true)), "application/json");
  });
  http.Delete(R"(/v1/conversations/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!convs.Erase(id)) return SendError(res, 404, "no conversation '" + id + "'");
    res.set_content(Dump(json{{"id", id}, {"object", "conversation"}, {"deleted", true}}), "application/json");
  });
}

}  // namespace kvtrim::server
