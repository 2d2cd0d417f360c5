// The line protocol between the before/after runner's parent and its children: see placement_lines.h.

#include "placement_lines.h"

#include <cerrno>
#include <cstdarg>
#include <cstdlib>

namespace pte_lab {
namespace {

using Field = std::optional<std::string>;

const char* kNull = "\\N";

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out;
}

Field text(const std::string& s) { return s; }
Field maybe(const std::string& s) { return s.empty() ? Field() : Field(s); }  // empty: none (null)
Field integer(int64_t v) { return std::to_string(v); }
Field integer(const std::optional<int64_t>& v) { return v ? integer(*v) : Field(); }

// One line's fields, unescaped, and the first thing wrong with them.
struct Reader {
  size_t number = 0;  // 1-based line number
  std::string kind;
  std::vector<Field> fields;
  std::string why;

  bool fail(const std::string& what) {
    if (why.empty()) why = "line " + std::to_string(number) + (kind.empty() ? "" : " (" + kind + ")") + ": " + what;
    return false;
  }

  bool split(const std::string& line) {
    std::vector<std::string> raw(1);
    for (char c : line) {
      if (c == '\t') raw.emplace_back();
      else raw.back() += c;
    }
    kind = raw[0];
    for (size_t i = 1; i < raw.size(); i++) {
      if (raw[i] == kNull) {
        fields.emplace_back();
        continue;
      }
      std::string v;
      for (size_t j = 0; j < raw[i].size(); j++) {
        char c = raw[i][j];
        if (c != '\\') {
          v += c;
          continue;
        }
        char e = j + 1 < raw[i].size() ? raw[i][++j] : '\0';
        if (e == '\\') v += '\\';
        else if (e == 't') v += '\t';
        else if (e == 'n') v += '\n';
        else if (e == 'r') v += '\r';
        else return fail("field " + std::to_string(i) + " has a bad escape '\\" + (e ? std::string(1, e) : "") + "'");
      }
      fields.push_back(v);
    }
    return true;
  }

  bool count(size_t n, bool or_more = false) {
    if (fields.size() == n || (or_more && fields.size() > n)) return true;
    return fail(std::to_string(fields.size()) + " fields, expected " + (or_more ? "at least " : "") +
                std::to_string(n));
  }
  bool string(size_t i, const char* name, std::string* out) {  // a string that must be there
    if (!fields[i]) return fail(std::string(name) + " is missing (\\N)");
    *out = *fields[i];
    return true;
  }
  std::string string_or_empty(size_t i) const { return fields[i] ? *fields[i] : ""; }
  bool integer(size_t i, const char* name, std::optional<int64_t>* out) {
    if (!fields[i]) {
      out->reset();
      return true;
    }
    const std::string& s = *fields[i];
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0) return fail(std::string(name) + " '" + s + "' is not an integer");
    *out = v;
    return true;
  }
  bool required(size_t i, const char* name, int64_t* out) {
    std::optional<int64_t> v;
    if (!integer(i, name, &v)) return false;
    if (!v) return fail(std::string(name) + " is missing (\\N)");
    *out = *v;
    return true;
  }
  bool boolean(size_t i, const char* name, std::optional<bool>* out) {
    if (!fields[i]) out->reset();
    else if (*fields[i] == "true") *out = true;
    else if (*fields[i] == "false") *out = false;
    else return fail(std::string(name) + " '" + *fields[i] + "' is not true, false or \\N");
    return true;
  }
  bool real(size_t i, const char* name, double* out) {
    if (!fields[i]) return fail(std::string(name) + " is missing (\\N)");
    const std::string& s = *fields[i];
    char* end = nullptr;
    *out = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') return fail(std::string(name) + " '" + s + "' is not a number");
    return true;
  }
};

#define PTE_LAB_COUNT(name) +1
constexpr size_t kStepFields = 0 PTE_LAB_STEP_FIELDS(PTE_LAB_COUNT);
constexpr size_t kArenaFields = 0 PTE_LAB_ARENA_FIELDS(PTE_LAB_COUNT);
constexpr size_t kRuntimeFields = 0 PTE_LAB_RUNTIME_FIELDS(PTE_LAB_COUNT);
#undef PTE_LAB_COUNT

bool read_step(Reader& r, StepRecord* s) {
  return r.count(kStepFields) && r.string(0, "step", &s->step) && (s->error = r.string_or_empty(1), true) &&
         r.boolean(2, "correct", &s->correct) && r.real(3, "seconds", &s->seconds) &&
         r.integer(4, "device_bytes", &s->device_bytes) && r.integer(5, "host_bytes", &s->host_bytes) &&
         r.integer(6, "device_events", &s->device_events) &&
         r.integer(7, "driver_device_bytes", &s->driver_device_bytes);
}

bool read_arena(Reader& r, ArenaRecord* a) {
  if (!(r.count(kArenaFields, true) && r.string(0, "when", &a->when) && r.string(1, "methods", &a->methods) &&
        r.required(2, "runtime_index", &a->runtime_index) && r.string(3, "device", &a->device) &&
        r.required(4, "bytes", &a->bytes) && r.string(5, "memory", &a->memory))) {
    return false;
  }
  a->why = r.string_or_empty(6);
  for (size_t i = kArenaFields; i < r.fields.size(); i++) {
    std::string u;
    if (!r.string(i, "touched_by", &u)) return false;
    a->touched_by.push_back(u);
  }
  return true;
}

bool read_runtime(Reader& r, RuntimeRecord* rt) {
  if (!(r.count(kRuntimeFields) && r.string(0, "label", &rt->label))) return false;
  rt->executorch_version = r.fields[1];
  rt->measured_by = r.fields[2];
  rt->host_measured_by = r.fields[3];
  rt->failure = r.fields[4];
  rt->runner = r.fields[5];
  rt->backend = r.fields[6];
  return true;
}

}  // namespace

std::string format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

LineWriter::LineWriter(FILE* out) : out_(out) {
  std::fputs(PTE_LAB_PLACEMENT_LINES_HEAD "\n", out_);
  std::fflush(out_);
}

void LineWriter::line(const std::vector<Field>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); i++) {
    if (i) s += '\t';
    s += i == 0 ? *fields[i] : fields[i] ? escape(*fields[i]) : kNull;
  }
  s += '\n';
  std::fwrite(s.data(), 1, s.size(), out_);
  std::fflush(out_);
}

void LineWriter::begin(const std::string& step) { line({text("BEGIN"), text(step)}); }

void LineWriter::step(const StepRecord& r) {
  char seconds[64];
  std::snprintf(seconds, sizeof seconds, "%.6f", r.seconds);
  line({text("STEP"), text(r.step), maybe(r.error),
        r.correct ? Field(*r.correct ? "true" : "false") : Field(), text(seconds), integer(r.device_bytes),
        integer(r.host_bytes), integer(r.device_events), integer(r.driver_device_bytes)});
}

void LineWriter::arena(const ArenaRecord& a) {
  std::vector<Field> f = {text("ARENA"), text(a.when), text(a.methods), integer(a.runtime_index), text(a.device),
                          integer(a.bytes), text(a.memory), maybe(a.why)};
  for (auto& u : a.touched_by) f.push_back(text(u));
  line(f);
}

void LineWriter::note(const std::string& t) { line({text("NOTE"), text(t)}); }

void LineWriter::runtime(const RuntimeRecord& r) {
  line({text("RUNTIME"), text(r.label), r.executorch_version, r.measured_by, r.host_measured_by, r.failure,
        r.runner, r.backend});
}

void LineWriter::end() { line({text("END")}); }

bool read_lines(const std::string& all, ChildLines* out, std::string* why) {
  size_t p = 0, number = 0;
  while (p < all.size()) {
    size_t e = all.find('\n', p);
    Reader r;
    r.number = ++number;
    if (e == std::string::npos) {
      out->cut = true;
      r.fail("cut short (no newline at its end)");
      *why = r.why;
      return false;
    }
    std::string line = all.substr(p, e - p);
    p = e + 1;
    if (number == 1) {
      if (line == PTE_LAB_PLACEMENT_LINES_HEAD) continue;
      r.fail("expected '" PTE_LAB_PLACEMENT_LINES_HEAD "', read '" + line.substr(0, 80) + "'");
      *why = r.why;
      return false;
    }
    bool ok = !out->ended || r.fail("a record after END");
    ok = ok && r.split(line);
    if (ok && r.kind == "BEGIN") {
      std::string step;
      ok = r.count(1) && r.string(0, "step", &step);
      if (ok) out->begun.push_back(step);
    } else if (ok && r.kind == "STEP") {
      StepRecord s;
      ok = read_step(r, &s);
      if (ok) out->steps.push_back(s);
    } else if (ok && r.kind == "ARENA") {
      ArenaRecord a;
      ok = read_arena(r, &a);
      if (ok) out->arenas.push_back(a);
    } else if (ok && r.kind == "NOTE") {
      std::string t;
      ok = r.count(1) && r.string(0, "text", &t);
      if (ok) out->notes.push_back(t);
    } else if (ok && r.kind == "RUNTIME") {
      RuntimeRecord rt;
      ok = read_runtime(r, &rt);
      if (ok) out->runtime = rt;
    } else if (ok && r.kind == "END") {
      ok = r.count(0);
      out->ended = ok;
    } else if (ok) {
      r.kind.clear();
      ok = r.fail("unknown record kind '" + line.substr(0, line.find('\t')).substr(0, 40) + "'");
    }
    if (!ok) {
      *why = r.why;
      return false;
    }
  }
  if (number == 0) {
    *why = "no lines (expected '" PTE_LAB_PLACEMENT_LINES_HEAD "' first)";
    return false;
  }
  return true;
}

}  // namespace pte_lab
