// The Redis context store (kvtrim serve --context-store redis://HOST:PORT):
// every replica pointed at one Redis server sees every context any of them
// stored. hiredis (Debian's libhiredis-dev) speaks the protocol; one
// connection per store, used by one request at a time, reconnected when it
// breaks. Durability is Redis's: with `appendonly yes` and `appendfsync
// always` a context acknowledged is on the Redis host's disk.
#include <hiredis/hiredis.h>

#include <cstdio>
#include <memory>
#include <mutex>

#include "server/context_backend.h"

namespace kvtrim::server {

namespace {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

class RedisBackend : public ContextBackend {
 public:
  RedisBackend(std::string url, std::string host, int port, const std::string& space)
      : url_(std::move(url)), host_(std::move(host)), port_(port), prefix_("kvtrim:" + space + ":"),
        counter_("kvtrim:" + space + "-next") {}
  ~RedisBackend() override {
    if (ctx_) redisFree(ctx_);
  }

  Status Connect() {
    std::lock_guard<std::mutex> lk(mu_);
    return ConnectLocked();
  }

  std::string name() const override { return url_; }

  Expected<int64_t> NextNumber() override {
    auto r = Command([&](redisContext* c) { return redisCommand(c, "INCR %s", counter_.c_str()); });
    if (!r.ok()) return r.error();
    if (r.value()->type != REDIS_REPLY_INTEGER) return MakeError(url_ + ": INCR answered no integer");
    return static_cast<int64_t>(r.value()->integer);
  }

  Status Write(const std::string& id, const std::string& bytes) override {
    const std::string key = prefix_ + id;
    auto r = Command([&](redisContext* c) {
      return redisCommand(c, "SET %b %b", key.data(), key.size(), bytes.data(), bytes.size());
    });
    if (!r.ok()) return r.error();
    if (r.value()->type != REDIS_REPLY_STATUS) return MakeError(url_ + ": SET " + key + " was not acknowledged");
    return {};
  }

  Expected<std::optional<std::string>> Read(const std::string& id) override {
    const std::string key = prefix_ + id;
    auto r = Command([&](redisContext* c) { return redisCommand(c, "GET %b", key.data(), key.size()); });
    if (!r.ok()) return r.error();
    if (r.value()->type == REDIS_REPLY_NIL) return std::optional<std::string>();
    if (r.value()->type != REDIS_REPLY_STRING) return MakeError(url_ + ": GET " + key + " answered no string");
    return std::optional<std::string>(std::string(r.value()->str, r.value()->len));
  }

  void Touch(const std::string& id) override {
    const std::string key = prefix_ + id;
    (void)Command([&](redisContext* c) { return redisCommand(c, "TOUCH %b", key.data(), key.size()); });
  }

  bool Remove(const std::string& id) override {
    const std::string key = prefix_ + id;
    auto r = Command([&](redisContext* c) { return redisCommand(c, "DEL %b", key.data(), key.size()); });
    return r.ok() && r.value()->type == REDIS_REPLY_INTEGER && r.value()->integer > 0;
  }

  std::vector<std::string> List() override;

 private:
  std::string url_, host_;
  int port_;
  std::string prefix_, counter_;  // "kvtrim:SPACE:" before every id, the id counter's key
  std::mutex mu_;
  redisContext* ctx_ = nullptr;

  Status ConnectLocked() {
    if (ctx_) redisFree(ctx_);
    ctx_ = redisConnectWithTimeout(host_.c_str(), port_, timeval{2, 0});
    if (!ctx_ || ctx_->err) {
      const std::string why = ctx_ ? ctx_->errstr : "out of memory";
      if (ctx_) redisFree(ctx_);
      ctx_ = nullptr;
      return MakeUnavailable("context store " + url_ + ": cannot connect (" + why + ")");
    }
    redisSetTimeout(ctx_, timeval{30, 0});
    return {};
  }

  // Runs one command; on a broken connection reconnects and tries once more.
  template <class F>
  Expected<Reply> Command(F&& send) {
    std::lock_guard<std::mutex> lk(mu_);
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!ctx_) KVTRIM_RETURN_IF_ERROR(ConnectLocked());
      Reply r(static_cast<redisReply*>(send(ctx_)));
      if (r) {
        if (r->type == REDIS_REPLY_ERROR) return MakeError("context store " + url_ + ": " + std::string(r->str, r->len));
        return r;
      }
      const std::string why = ctx_->errstr;
      redisFree(ctx_);
      ctx_ = nullptr;
      if (attempt == 1) return MakeUnavailable("context store " + url_ + ": " + why);
    }
    return MakeUnavailable("context store " + url_ + ": unreachable");
  }
};

std::vector<std::string> RedisBackend::List() {
  std::vector<std::string> ids;
  const std::string match = prefix_ + "*";
  std::string cursor = "0";
  do {  // SCAN, not KEYS: it never blocks the Redis server on a large keyspace
    auto r = Command([&](redisContext* c) {
      return redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor.c_str(), match.c_str());
    });
    if (!r.ok() || r.value()->type != REDIS_REPLY_ARRAY || r.value()->elements != 2) {
      std::fprintf(stderr, "kvtrim serve: listing %s failed: %s\n", url_.c_str(),
                   r.ok() ? "unexpected reply" : r.error().message.c_str());
      return {};
    }
    cursor.assign(r.value()->element[0]->str, r.value()->element[0]->len);
    const redisReply* keys = r.value()->element[1];
    for (size_t i = 0; i < keys->elements; ++i) {
      std::string key(keys->element[i]->str, keys->element[i]->len);
      std::string id = key.substr(prefix_.size());
      if (IsContextId(id)) ids.push_back(std::move(id));
    }
  } while (cursor != "0");
  return ids;
}

}  // namespace

Expected<std::unique_ptr<ContextBackend>> OpenRedisBackend(const std::string& url, const std::string& space) {
  // redis://HOST:PORT (HOST may be a name or an IPv4 address; no user, no db)
  std::string rest = url.substr(std::string("redis://").size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  int port = 6379;
  if (colon != std::string::npos) {
    const std::string p = rest.substr(colon + 1);
    char* end = nullptr;
    const long v = std::strtol(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || v < 1 || v > 65535) return MakeError("context store '" + url + "': bad port '" + p + "'");
    port = static_cast<int>(v);
  }
  if (host.empty() || host.find('/') != std::string::npos || host.find('@') != std::string::npos)
    return MakeError("context store '" + url + "': expected redis://HOST:PORT");
  auto b = std::make_unique<RedisBackend>(url, host, port, space);
  KVTRIM_RETURN_IF_ERROR(b->Connect());
  return std::unique_ptr<ContextBackend>(std::move(b));
}

}  // namespace kvtrim::server
