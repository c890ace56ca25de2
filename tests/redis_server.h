// A real redis-server (Debian's) for the tests that need one, on a free
// loopback port; optionally persisting to a directory (appendonly, every
// write fsynced) so that one stopped and started again on the same port
// and directory keeps what it acknowledged.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

namespace kvtrim::server::test_redis {

// A free loopback port (bound, read, released).
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct RedisServer {
  pid_t pid = -1;
  int port = 0;
  std::string url, dir;
  // port 0: a free one; dir empty: nothing persisted.
  explicit RedisServer(int want_port = 0, std::string persist_dir = "") : dir(std::move(persist_dir)) {
    port = want_port > 0 ? want_port : FreePort();
    url = "redis://127.0.0.1:" + std::to_string(port);
    Start();
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  void Start() {
    const std::string p = std::to_string(port);  // the child only execs (async-signal-safe calls)
    const bool keep = !dir.empty();
    const std::string d = keep ? dir : ".";
    pid = ::fork();
    if (pid == 0) {
      ::execlp("redis-server", "redis-server", "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "", "--dir",
               d.c_str(), "--appendonly", keep ? "yes" : "no", "--appendfsync", "always", "--loglevel", "warning",
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // up within 10 s
      if (Ready()) return;
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) break;  // exited: not installed
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pid = -1;
  }
  // Answers PING with PONG: accepting connections is not enough, since a
  // server restarted on a persisted directory answers "-LOADING" to every
  // command until it has read its append-only file back.
  bool Ready() const {
    redisContext* c = redisConnect("127.0.0.1", port);
    bool ok = false;
    if (c && !c->err) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r && r->type == REDIS_REPLY_STATUS && std::string(r->str, r->len) == "PONG";
      if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
  }
  void Stop() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    pid = -1;
  }
  ~RedisServer() { Stop(); }
  bool up() const { return pid > 0; }
};

}  // namespace kvtrim::server::test_redis

#define REQUIRE_REDIS(r) \
  ASSERT_TRUE((r).up()) << "redis-server did not start: `bash scripts/setup.sh` installs it (Debian redis-server)"
