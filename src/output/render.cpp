#include "output/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "util/token.h"

namespace rlock::output {

namespace {

void emit(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

/// Makes control characters visible so an owner or command string can never
/// move the cursor or fake a line of the table.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

std::string clip(std::string s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 1) + "~";
}

Json who_fields(Json::Object& o, const lock::Identity& who) {
  o.emplace_back("owner", who.owner);
  o.emplace_back("host", who.host);
  o.emplace_back("pid", who.pid);
  o.emplace_back("command", who.command);
  return Json(o);
}

Json waiter_json(const lock::WaiterView& w) {
  Json::Object o{{"position", w.position}, {"id", w.id}, {"mode", w.mode}};
  who_fields(o, w.who);
  o.emplace_back("waiting_ms", static_cast<long long>(w.waiting.count()));
  return Json(o);
}

std::string mode_of(const lock::LockView& v) {
  if (v.limit > 1) return fmt::format("semaphore/{}", v.limit);
  bool shared = std::any_of(v.holders.begin(), v.holders.end(),
                            [](const auto& h) { return h.mode == "shared"; });
  return shared ? "shared" : "exclusive";
}

Json audit_json(const lock::AuditView& a) {
  Json::Object by;
  who_fields(by, a.by);
  Json::Array evicted;
  for (const auto& h : a.evicted) evicted.push_back(holder_json(h));
  return Json(Json::Object{{"ago_ms", static_cast<long long>(a.ago.count())},
                           {"by", Json(by)},
                           {"evicted", Json(evicted)}});
}

Json view_json(const lock::LockView& v) {
  Json::Array holders, waiters;
  for (const auto& h : v.holders) holders.push_back(holder_json(h));
  for (const auto& w : v.waiters) waiters.push_back(waiter_json(w));
  return Json(Json::Object{{"name", v.name},
                           {"held", !v.holders.empty()},
                           {"mode", mode_of(v)},
                           {"limit", v.limit},
                           {"fence", static_cast<long long>(v.last_fence)},
                           {"holders", Json(holders)},
                           {"waiters", Json(waiters)},
                           {"forced", v.forced ? audit_json(*v.forced) : Json()}});
}

}  // namespace

Json holder_json(const lock::HolderView& h) {
  Json::Object o{{"id", h.id}, {"mode", h.mode}};
  who_fields(o, h.who);
  o.emplace_back("age_ms", static_cast<long long>(h.age.count()));
  o.emplace_back("ttl_ms", static_cast<long long>(h.ttl_left.count()));
  o.emplace_back("fence", static_cast<long long>(h.fence));
  return Json(o);
}

std::string describe_holder(const lock::HolderView& h) {
  std::string text = printable(h.who.owner.empty() ? "someone" : h.who.owner);
  if (h.who.pid) text += fmt::format(" (pid {}", h.who.pid);
  if (!h.who.command.empty()) text += fmt::format(", {}", printable(clip(h.who.command, 60)));
  if (h.who.pid) text += ")";
  return text;
}

void print_acquired(const std::string& name, const lock::Grant& grant, const lock::Request& request,
                    bool json) {
  if (!json) return emit(grant.token + "\n");
  emit(Json(Json::Object{{"name", name},
                         {"token", grant.token},
                         {"id", short_id(grant.token)},
                         {"fence", static_cast<long long>(grant.fence)},
                         {"ttl_ms", static_cast<long long>(request.ttl.count())},
                         {"mode", request.shared ? "shared" : "exclusive"},
                         {"limit", request.limit}})
           .dump() +
       "\n");
}

void print_renewed(const std::string& name, Millis ttl, bool json) {
  if (!json) return;
  emit(Json(Json::Object{
                {"name", name}, {"renewed", true}, {"ttl_ms", static_cast<long long>(ttl.count())}})
           .dump() +
       "\n");
}

void print_released(const std::string& name, bool json) {
  if (!json) return;
  emit(Json(Json::Object{{"name", name}, {"released", true}}).dump() + "\n");
}

void print_forced(const std::string& name, const std::vector<lock::HolderView>& evicted,
                  bool json) {
  if (json) {
    Json::Array list;
    for (const auto& h : evicted) list.push_back(holder_json(h));
    emit(Json(Json::Object{{"name", name}, {"released", !evicted.empty()}, {"evicted", list}})
             .dump() +
         "\n");
    return;
  }
  for (const auto& h : evicted)
    emit(fmt::format("evicted {} from lock '{}': {} on {}, fence {}\n", h.id, printable(name),
                     describe_holder(h), printable(h.who.host), h.fence));
}

void print_status(const lock::LockView& v, bool json) {
  if (json) return emit(view_json(v).dump() + "\n");
  std::string out;
  if (v.holders.empty()) {
    out += fmt::format("lock '{}': free (last fence {})\n", printable(v.name), v.last_fence);
  } else {
    out +=
        fmt::format("lock '{}': held ({}), {} holder{}, last fence {}\n", printable(v.name),
                    mode_of(v), v.holders.size(), v.holders.size() == 1 ? "" : "s", v.last_fence);
    out += fmt::format("  {:<8}  {:<9}  {:<20}  {:<14}  {:>7}  {:>7}  {:>7}  {:>6}  {}\n", "ID",
                       "MODE", "OWNER", "HOST", "PID", "AGE", "TTL", "FENCE", "COMMAND");
    for (const auto& h : v.holders)
      out += fmt::format("  {:<8}  {:<9}  {:<20}  {:<14}  {:>7}  {:>7}  {:>7}  {:>6}  {}\n", h.id,
                         h.mode, clip(printable(h.who.owner), 20), clip(printable(h.who.host), 14),
                         h.who.pid, format_duration(h.age), format_duration(h.ttl_left), h.fence,
                         printable(h.who.command));
  }
  if (!v.waiters.empty()) {
    out += fmt::format("  waiting ({}):\n", v.waiters.size());
    for (const auto& w : v.waiters)
      out += fmt::format("  {:>3}. {:<8}  {:<9}  {:<20}  {:<14}  {:>7}  waiting {}  {}\n",
                         w.position, w.id, w.mode, clip(printable(w.who.owner), 20),
                         clip(printable(w.who.host), 14), w.who.pid, format_duration(w.waiting),
                         printable(w.who.command));
  }
  if (v.forced) {
    out += fmt::format("  force-released {} ago by {} on {}:", format_duration(v.forced->ago),
                       printable(v.forced->by.owner), printable(v.forced->by.host));
    for (const auto& h : v.forced->evicted) out += " " + h.id + " " + describe_holder(h);
    out += "\n";
  }
  emit(out);
}

void print_list(const std::vector<lock::LockView>& views, bool json) {
  if (json) {
    Json::Array locks;
    for (const auto& v : views) locks.push_back(view_json(v));
    return emit(Json(Json::Object{{"locks", Json(locks)}}).dump() + "\n");
  }
  if (views.empty()) return;
  std::string out =
      fmt::format("{:<24}  {:<11}  {:>7}  {:<20}  {:>7}  {:>7}  {:>6}  {:>7}  {}\n", "NAME", "MODE",
                  "HOLDERS", "OWNER", "AGE", "TTL", "FENCE", "WAITERS", "COMMAND");
  for (const auto& v : views) {
    const lock::HolderView* first = v.holders.empty() ? nullptr : &v.holders.front();
    out += fmt::format("{:<24}  {:<11}  {:>7}  {:<20}  {:>7}  {:>7}  {:>6}  {:>7}  {}\n",
                       clip(printable(v.name), 24), mode_of(v), v.holders.size(),
                       first ? clip(printable(first->who.owner), 20) : "-",
                       first ? format_duration(first->age) : "-",
                       first ? format_duration(first->ttl_left) : "-", v.last_fence,
                       v.waiters.size(), first ? printable(first->who.command) : "");
  }
  emit(out);
}

}  // namespace rlock::output
