#include "output/render.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "output/columns.h"
#include "output/text.h"
#include "util/token.h"

namespace rlock::output {

namespace {

/// A holder's age as the text shows it: "?" when its record is missing.
std::string age_shown(const lock::HolderView& h) {
  return h.recorded ? format_duration(h.age) : "?";
}

/// A number from a record as the text shows it: "?" when it is missing.
std::string recorded_number(bool recorded, std::int64_t n) {
  return recorded ? std::to_string(n) : "?";
}

bool g_stdout_closed = false;
unsigned g_claimed_fds = 0;

bool g_quiet_broken_pipe = false;

Result<void> write_failed(int err) {
  if (err == EPIPE && g_quiet_broken_pipe) {
    // rlock ignores SIGPIPE (see cli.cpp); a filter that lost its reader
    // dies of it, so the shell sees what it sees of `ls | head`.
    std::signal(SIGPIPE, SIG_DFL);
    std::raise(SIGPIPE);
  }
  return fail(Error::Code::internal,
              fmt::format("cannot write to standard output: {}", std::strerror(err)));
}

/// Writes and flushes at once, so that a failure (ENOSPC, EPIPE, EBADF) is
/// seen here, while the command can still act on it, not at exit.
Result<void> emit(const std::string& text) {
  if (g_stdout_closed) return write_failed(EBADF);
  errno = 0;
  size_t written = std::fwrite(text.data(), 1, text.size(), stdout);
  if (written != text.size() || std::fflush(stdout) != 0 || std::ferror(stdout))
    return write_failed(errno ? errno : EIO);
  return {};
}

/// A listing is written in pieces of about this size, as it is rendered: the
/// output of 100000 locks (12 MB of text, 30 MB of JSON) never exists as
/// one string, whose pages cost as much to fault in as to fill.
constexpr std::size_t k_piece = std::size_t{64} * 1024;

/// Emits `out` and empties it once it holds a piece.
Result<void> emit_piece(std::string& out) {
  if (out.size() < k_piece) return {};
  auto written = emit(out);
  out.clear();
  return written;
}

/// A JSON field for a name: "name" always (invalid UTF-8 shown as U+FFFD),
/// and "name_b64" with its exact bytes when that loses anything, so two
/// names never look alike and any name can be given back to rlock.
void name_fields(Json::Object& o, const std::string& name) {
  o.emplace_back("name", name);
  if (!valid_utf8(name)) o.emplace_back("name_b64", base64(name));
}

/// `recorded`: false for a holder or waiter whose record is missing, whose
/// pid is unknown (null), not 0.
void who_fields(Json::Object& o, const lock::Identity& who, bool recorded = true) {
  o.emplace_back("owner", who.owner);
  o.emplace_back("host", who.host);
  o.emplace_back("pid", recorded ? Json(static_cast<long long>(who.pid)) : Json());
  o.emplace_back("command", who.command);
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
                           {"acl_user", a.acl_user},
                           {"evicted", Json(evicted)}});
}

/// who_fields, written straight.
void write_who(JsonWriter& o, const lock::Identity& who, bool recorded) {
  o.text("owner", who.owner);
  o.text("host", who.host);
  if (recorded)
    o.integer("pid", static_cast<std::int64_t>(who.pid));
  else
    o.name("pid") += "null";
  o.text("command", who.command);
}

/// holder_json, written straight into `out`.
void write_holder(std::string& out, const lock::HolderView& h) {
  JsonWriter o(out);
  o.text("id", h.id);
  o.text("mode", h.mode);
  write_who(o, h.who, h.recorded);
  if (h.recorded)
    o.integer("age_ms", static_cast<std::int64_t>(h.age.count()));
  else
    o.name("age_ms") += "null";
  o.integer("ttl_ms", static_cast<std::int64_t>(h.ttl_left.count()));
  if (h.recorded)
    o.integer("fence", h.fence);
  else
    o.name("fence") += "null";
}

/// waiter_json, written straight into `out`.
void write_waiter(std::string& out, const lock::WaiterView& w) {
  JsonWriter o(out);
  o.integer("position", static_cast<std::int64_t>(w.position));
  o.text("id", w.id);
  o.text("mode", w.mode);
  write_who(o, w.who, w.recorded);
  if (w.recorded)
    o.integer("waiting_ms", static_cast<std::int64_t>(w.waiting.count()));
  else
    o.name("waiting_ms") += "null";
}

/// `[a,b,...]` of `items`, each written by `write`.
template <typename Items, typename Write>
void write_array(std::string& out, const Items& items, Write write) {
  out += '[';
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += ',';
    first = false;
    write(out, item);
  }
  out += ']';
}

/// Quorum mode only: every member's view.
Json members_json(const lock::LockView& v) {
  Json::Array members;
  for (const auto& m : v.members) {
    Json::Array ids;
    for (const auto& id : m.holders) ids.push_back(Json(id));
    Json::Object member{{"member", m.member},
                        {"state", m.state},
                        {"holders", Json(std::move(ids))},
                        {"fence", static_cast<long long>(m.last_fence)}};
    if (!m.problem.empty()) member.emplace_back("error", m.problem);
    members.push_back(Json(std::move(member)));
  }
  return Json(std::move(members));
}

/// One lock as a JSON object, written straight into `out`.
void write_view(std::string& out, const lock::LockView& v) {
  JsonWriter o(out);
  o.text("name", v.name);
  if (!valid_utf8(v.name)) o.text("name_b64", base64(v.name));
  o.boolean("held", !v.holders.empty());
  o.text("mode", mode_of(v));
  o.integer("limit", static_cast<std::int64_t>(v.limit));
  o.integer("fence", v.last_fence);
  write_array(o.name("holders"), v.holders, write_holder);
  write_array(o.name("waiters"), v.waiters, write_waiter);
  o.value("forced", v.forced.empty() ? Json() : audit_json(v.forced.front()));
  write_array(o.name("forced_history"), v.forced,
              [](std::string& into, const lock::AuditView& a) { audit_json(a).dump_to(into); });
  if (!v.members.empty()) o.value("members", members_json(v));
}

/// Digits of a fence (16 of them since fences are times in µs).
std::size_t digits(std::int64_t value) {
  std::size_t n = value < 0 ? 2 : 1;
  for (value = value < 0 ? -(value / 10) : value / 10; value > 0; value /= 10) ++n;
  return n;
}

/// The FENCE column: as wide as its widest value, at least its title.
template <typename Range, typename Fence>
std::size_t fence_width(const Range& rows, Fence fence) {
  std::size_t width = 5;
  for (const auto& row : rows) width = std::max(width, digits(fence(row)));
  return width;
}

/// The width an AGE or TTL column needs for `d` (format_duration): 7 up to
/// an hour ("59.999s"), beyond it the hours' digits and "h59m59s" at the
/// most ("167h59m59s", a week's TTL), and the sign of a forged negative.
/// Computed, not formatted: a listing may have 100000 rows.
std::size_t duration_width(Millis d) {
  const auto count = d.count();
  const std::uint64_t ms =
      count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
  std::size_t width = ms < 3'600'000 ? 7 : 7 + digits(static_cast<std::int64_t>(ms / 3'600'000));
  return width + (count < 0 ? 1 : 0);
}

/// `{"name", ...fields}` as one line of JSON.
Result<void> emit_named(const std::string& name, Json::Object fields) {
  Json::Object o;
  name_fields(o, name);
  for (auto& field : fields) o.push_back(std::move(field));
  return emit(Json(o).dump() + "\n");
}

}  // namespace

void end_quietly_on_broken_pipe() {
  g_quiet_broken_pipe = true;
}

Result<void> flush_stdout() {
  if (g_stdout_closed) return write_failed(EBADF);
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) return write_failed(errno ? errno : EIO);
  return {};
}

void claim_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() returns the lowest free descriptor: this one, as the lower
    // ones are open by now.
    int opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) close(opened);
    if (opened == fd) g_claimed_fds |= 1U << fd;
    if (fd == STDOUT_FILENO) g_stdout_closed = true;
  }
}

unsigned claimed_standard_fds() {
  return g_claimed_fds;
}

Json holder_json(const lock::HolderView& h) {
  Json::Object o{{"id", h.id}, {"mode", h.mode}};
  who_fields(o, h.who, h.recorded);
  o.emplace_back("age_ms", h.recorded ? Json(static_cast<long long>(h.age.count())) : Json());
  o.emplace_back("ttl_ms", static_cast<long long>(h.ttl_left.count()));
  o.emplace_back("fence", h.recorded ? Json(static_cast<long long>(h.fence)) : Json());
  return Json(std::move(o));
}

std::string describe_holder(const lock::HolderView& h) {
  std::string text = printable(h.who.owner.empty() ? "someone" : h.who.owner);
  if (h.who.pid) text += fmt::format(" (pid {}", h.who.pid);
  if (!h.who.command.empty()) text += fmt::format(", {}", clip(h.who.command, 60));
  if (h.who.pid) text += ")";
  return text;
}

Result<void> print_acquired(const std::string& name, const lock::Grant& grant,
                            const lock::Request& request, Millis lease_left, bool json) {
  if (!json) return emit(grant.token + "\n");
  const char* mode = request.shared ? "shared" : request.limit > 1 ? "semaphore" : "exclusive";
  return emit_named(name, {{"token", grant.token},
                           {"id", short_id(grant.token)},
                           {"fence", static_cast<long long>(grant.fence)},
                           {"ttl_ms", static_cast<long long>(lease_left.count())},
                           {"mode", mode},
                           {"limit", request.limit}});
}

Result<void> print_renewed(const std::string& name, Millis ttl, bool json) {
  if (!json) return {};
  return emit_named(name, {{"renewed", true}, {"ttl_ms", static_cast<long long>(ttl.count())}});
}

Result<void> print_released(const std::string& name, bool json) {
  if (!json) return {};
  return emit_named(name, {{"released", true}});
}

Result<void> print_ran(const std::string& name, const RunSummary& run) {
  const bool exited = WIFEXITED(run.wait_status);
  return emit_named(
      name, {{"id", short_id(run.grant.token)},
             {"fence", static_cast<long long>(run.grant.fence)},
             {"exit_code", exited ? Json(WEXITSTATUS(run.wait_status)) : Json()},
             {"signal", WIFSIGNALED(run.wait_status) ? Json(WTERMSIG(run.wait_status)) : Json()},
             {"held_ms", static_cast<long long>(run.held.count())},
             {"released", run.released},
             {"lost", run.lost ? Json(*run.lost) : Json()}});
}

Result<void> print_forced(const std::string& name, const std::vector<lock::HolderView>& evicted,
                          bool json) {
  if (json) {
    Json::Array list;
    for (const auto& h : evicted) list.push_back(holder_json(h));
    return emit_named(name, {{"released", !evicted.empty()}, {"evicted", list}});
  }
  std::string out;
  for (const auto& h : evicted)
    out += h.recorded
               ? fmt::format("evicted {} from lock {}: {} on {}, fence {}\n", printable(h.id),
                             quoted_name(name), describe_holder(h), printable(h.who.host), h.fence)
               : fmt::format("evicted {} from lock {}: a holder without a record\n",
                             printable(h.id), quoted_name(name));
  return out.empty() ? Result<void>{} : emit(out);
}

Result<void> print_status(const lock::LockView& v, bool json) {
  if (json) {
    std::string out;
    write_view(out, v);
    return emit(out + "\n");
  }
  std::string out;
  if (v.holders.empty()) {
    out += fmt::format("lock {}: free (last fence {})\n", quoted_name(v.name), v.last_fence);
  } else {
    out +=
        fmt::format("lock {}: held ({}), {} holder{}, last fence {}\n", quoted_name(v.name),
                    mode_of(v), v.holders.size(), v.holders.size() == 1 ? "" : "s", v.last_fence);
    const std::size_t fence = fence_width(v.holders, [](const auto& h) { return h.fence; });
    std::size_t age = 7, ttl = 7;
    for (const auto& h : v.holders) {
      if (h.recorded) age = std::max(age, duration_width(h.age));
      ttl = std::max(ttl, duration_width(h.ttl_left));
    }
    out += fmt::format("  {:<8}  {:<9}  {:<20}  {:<14}  {:>7}  {:>{}}  {:>{}}  {:>{}}  {}\n", "ID",
                       "MODE", "OWNER", "HOST", "PID", "AGE", age, "TTL", ttl, "FENCE", fence,
                       "COMMAND");
    for (const auto& h : v.holders)
      out += fmt::format("  {:<8}  {}  {}  {}  {:>7}  {:>{}}  {:>{}}  {:>{}}  {}\n",
                         printable(h.id), cell(h.mode, 9), cell(h.who.owner, 20),
                         cell(h.who.host, 14), recorded_number(h.recorded, h.who.pid), age_shown(h),
                         age, format_duration(h.ttl_left), ttl,
                         recorded_number(h.recorded, h.fence), fence, printable(h.who.command));
  }
  if (!v.waiters.empty()) {
    out += fmt::format("  waiting ({}):\n", v.waiters.size());
    for (const auto& w : v.waiters)
      out += fmt::format("  {:>3}. {:<8}  {}  {}  {}  {:>7}  waiting {}  {}\n", w.position,
                         printable(w.id), cell(w.mode, 9), cell(w.who.owner, 20),
                         cell(w.who.host, 14), recorded_number(w.recorded, w.who.pid),
                         w.recorded ? format_duration(w.waiting) : "?", printable(w.who.command));
  }
  if (!v.members.empty()) {
    out += fmt::format("  members ({}, a majority is {}):\n", v.members.size(),
                       v.members.size() / 2 + 1);
    for (const auto& m : v.members) {
      std::string ids;
      for (const auto& id : m.holders) ids += (ids.empty() ? "" : ",") + printable(id);
      out += fmt::format("  {:<11}  {}  holders {}  last fence {}{}\n", printable(m.state),
                         printable(m.member), ids.empty() ? "-" : ids, m.last_fence,
                         m.problem.empty() ? "" : ": " + printable(m.problem));
    }
  }
  // Newest first. Who forced is what that client said about itself.
  for (const auto& a : v.forced) {
    out += fmt::format("  force-released {} ago by {} on {}:", format_duration(a.ago),
                       printable(a.by.owner), printable(a.by.host));
    for (const auto& h : a.evicted) out += " " + printable(h.id) + " " + describe_holder(h);
    if (!a.acl_user.empty())
      out += fmt::format(" (ACL user {}, self-reported)", printable(a.acl_user));
    out += "\n";
  }
  return emit(out);
}

namespace {

/// print_list of any sequence of views.
template <typename Views>
Result<void> print_views(const Views& views, bool json, const std::vector<std::string>& unlisted) {
  if (json) {
    // {"locks":[...],"broken":[...]}, each lock dumped as soon as it is
    // built (a document of 100000 locks never exists as one tree: building
    // it first doubled the time and the memory of a listing), and written
    // a piece at a time.
    std::string out;
    // A piece and the lock that overflows it.
    out.reserve(k_piece + 4096);
    out += "{\"locks\":[";
    bool first = true;
    for (const auto& v : views) {
      if (!v.problem.empty()) continue;
      if (!first) out += ',';
      first = false;
      write_view(out, v);
      if (auto written = emit_piece(out); !written) return written;
    }
    out += "],\"broken\":[";
    first = true;
    for (const auto& v : views) {
      if (v.problem.empty()) continue;
      if (!first) out += ',';
      first = false;
      Json::Object o;
      name_fields(o, v.name);
      o.emplace_back("error", v.problem);
      Json(std::move(o)).dump_to(out);
      if (auto written = emit_piece(out); !written) return written;
    }
    out += ']';
    // Only in a listing that left a part of the deployment out.
    if (!unlisted.empty()) {
      out += ",\"unlisted\":[";
      for (std::size_t k = 0; k < unlisted.size(); ++k) {
        if (k > 0) out += ',';
        json_quote_to(out, unlisted[k]);
      }
      out += ']';
    }
    out += "}\n";
    return emit(out);
  }
  if (views.empty()) return {};
  // A name is what an operator types back (status NAME, release --force
  // NAME), so it is never cut: the column is as wide as the widest name.
  std::size_t name_width = 24;
  // Names that need quoting (shown_name) are rare: most are shown as they are.
  const auto width_of = [](const std::string& name) {
    return name_needs_quoting(name) ? shown_width(shown_name(name)) : shown_width(name);
  };
  for (const auto& v : views) name_width = std::max(name_width, width_of(v.name));
  const std::size_t fence = fence_width(views, [](const auto& v) { return v.last_fence; });
  // AGE and TTL (of each lock's first holder) as wide as their widest.
  std::size_t age = 7, ttl = 7;
  for (const auto& v : views) {
    if (!v.problem.empty() || v.holders.empty()) continue;
    const lock::HolderView& h = v.holders.front();
    if (h.recorded) age = std::max(age, duration_width(h.age));
    ttl = std::max(ttl, duration_width(h.ttl_left));
  }
  std::string out = fmt::format(
      "{:<{}}  {:<11}  {:>7}  {:<20}  {:>{}}  {:>{}}  {:>{}}  {:>7}  {}\n", "NAME", name_width,
      "MODE", "HOLDERS", "OWNER", "AGE", age, "TTL", ttl, "FENCE", fence, "WAITERS", "COMMAND");
  // Written a piece at a time (a row of a held lock takes ~125 bytes). Cells
  // are appended (output/columns.h): a format string parsed per row was
  // most of the rendering.
  out.reserve(k_piece + 4096);
  const auto sep = [&out] { out += "  "; };
  for (const auto& v : views) {
    if (auto written = emit_piece(out); !written) return written;
    if (name_needs_quoting(v.name))
      append_shown(out, shown_name(v.name), name_width);
    else
      append_shown(out, v.name, name_width);
    sep();
    if (!v.problem.empty()) {
      // Listed, so that nobody mistakes it for free, and skipped.
      append_left(out, "broken", 11);
      sep();
      append_right(out, "-", 7);
      sep();
      append_left(out, "-", 20);
      for (const std::size_t width : {age, ttl, fence, std::size_t{7}}) {
        sep();
        append_right(out, "-", width);
      }
      sep();
      append_shown(out, v.problem);
      out += '\n';
      continue;
    }
    const lock::HolderView* first = v.holders.empty() ? nullptr : &v.holders.front();
    append_left(out, mode_of(v), 11);
    sep();
    append_right(out, static_cast<std::int64_t>(v.holders.size()), 7);
    sep();
    if (first) {
      append_shown(out, first->who.owner, 20);
      sep();
      append_right(out, age_shown(*first), age);
      sep();
      append_right(out, format_duration(first->ttl_left), ttl);
    } else {
      append_left(out, "-", 20);
      sep();
      append_right(out, "-", age);
      sep();
      append_right(out, "-", ttl);
    }
    sep();
    append_right(out, v.last_fence, fence);
    sep();
    append_right(out, static_cast<std::int64_t>(v.waiters.size()), 7);
    sep();
    if (first) append_shown(out, first->who.command);
    out += '\n';
  }
  return emit(out);
}

}  // namespace

Result<void> print_list(const lock::Listing& views, bool json,
                        const std::vector<std::string>& unlisted) {
  return print_views(views, json, unlisted);
}

Result<void> print_list(const std::vector<lock::LockView>& views, bool json) {
  return print_views(views, json, {});
}

}  // namespace rlock::output
