#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace bench {

std::string format_value(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  // Thousands separators: ',' between groups of three integer digits.
  const std::string s = buf;
  const std::size_t dot = s.find('.');
  const std::size_t int_end = dot == std::string::npos ? s.size() : dot;
  const std::size_t int_begin = (s[0] == '-') ? 1 : 0;
  std::string out(s, 0, int_begin);
  for (std::size_t i = int_begin; i < int_end; ++i) {
    out.push_back(s[i]);
    const std::size_t left = int_end - i - 1;
    if (left > 0 && left % 3 == 0) out.push_back(',');
  }
  out.append(s, int_end, std::string::npos);
  return out;
}

Row& Report::add(Row row) {
  if (find(row.id) != nullptr) throw std::logic_error("duplicate row " + row.id);
  rows_.push_back(std::move(row));
  return rows_.back();
}

Row* Report::find(const std::string& id) {
  for (auto& r : rows_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

void Report::record(const std::string& id, double value) {
  Row* r = find(id);
  if (r == nullptr) throw std::logic_error("no row " + id);
  r->runs.push_back(value);
}

namespace {

// "peer.redis-py.contended.p2.p50" -> "contended.p2.p50", and likewise for the lock kinds of
// scenario 5 ("kind.fair.contended.p2.p50"): every library's and kind's row of one measurement
// sits next to dlock Mutex's.
std::string group_of(const std::string& id) {
  for (const std::string prefix : {"peer.", "kind."}) {
    if (id.rfind(prefix, 0) != 0) continue;
    const auto dot = id.find('.', prefix.size());
    return dot == std::string::npos ? id : id.substr(dot + 1);
  }
  return id;
}

}  // namespace

std::string FloorModes::judged_text() const {
  if (!known()) return "floor mode unknown";
  if (fast_rounds == 0) return "judged against slow-mode floor only";
  return "fast floor, " + std::to_string(fast_rounds) + " of " + std::to_string(fast.size()) + " rounds";
}

void Report::set_floor_modes(const std::string& rtt_id, double threshold_us) {
  modes_row_ = rtt_id;
  modes_ = FloorModes{};
  modes_.threshold_us = threshold_us;
}

namespace {

bool is_ratio(Target::Kind k) {
  return k == Target::Kind::ratio_info || k == Target::Kind::ratio_at_least || k == Target::Kind::ratio_at_most;
}

}  // namespace

void Report::evaluate() {
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < rows_.size(); ++i) first.emplace(group_of(rows_[i].id), i);
  std::stable_sort(rows_.begin(), rows_.end(),
                   [&](const Row& a, const Row& b) { return first[group_of(a.id)] < first[group_of(b.id)]; });
  for (auto& r : rows_) {
    r.spread = spread(r.runs);
    r.result.clear();
    r.note.clear();
    r.ratio = r.ratio_min = r.ratio_max = 0;
    r.round_ratios.clear();
    r.judged_against.clear();
  }

  const double threshold = modes_.threshold_us;
  modes_ = FloorModes{};
  modes_.threshold_us = threshold;
  if (const Row* rtt = modes_row_.empty() ? nullptr : find(modes_row_); rtt != nullptr && rtt->paired) {
    for (double p50 : rtt->runs) {
      const bool fast = p50 > 0 && p50 < threshold;
      modes_.ping_p50_us.push_back(p50);
      modes_.fast.push_back(fast);
      ++(fast ? modes_.fast_rounds : modes_.slow_rounds);
    }
  }

  for (auto& r : rows_) {
    if (r.runs.empty() || r.target.kind == Target::Kind::none) continue;
    const double m = r.spread.median;
    if (is_ratio(r.target.kind)) {
      const Row* b = find(r.target.baseline);
      if (b == nullptr || b->runs.empty()) {
        r.note = "no baseline measured";
        continue;
      }
      // The baseline's rounds that count: the judged mode's (all of them for a baseline that
      // is not measured per round, which does not happen today but costs nothing to allow).
      std::vector<double> judged_base;
      for (std::size_t i = 0; i < b->runs.size(); ++i) {
        if (!b->paired || modes_.judged(i)) judged_base.push_back(b->runs[i]);
      }
      const bool paired = r.paired && b->paired && r.runs.size() == b->runs.size();
      if (paired) {
        std::vector<double> judged;
        r.round_ratios.assign(r.runs.size(), std::numeric_limits<double>::quiet_NaN());
        for (std::size_t i = 0; i < r.runs.size(); ++i) {
          if (b->runs[i] <= 0) continue;
          r.round_ratios[i] = r.runs[i] / b->runs[i];
          if (modes_.judged(i)) judged.push_back(r.round_ratios[i]);
        }
        if (judged.empty()) {
          r.note = "no baseline measured";
          continue;
        }
        const Spread rs = spread(std::move(judged));
        r.ratio = rs.median;
        r.ratio_min = rs.min;
        r.ratio_max = rs.max;
        r.judged_against = modes_.judged_text();
      } else {
        const double base = spread(std::move(judged_base)).median;
        if (base <= 0) {
          r.note = "no baseline measured";
          continue;
        }
        r.ratio = m / base;
        r.ratio_min = r.spread.min / base;
        r.ratio_max = r.spread.max / base;
        r.judged_against = "unpaired: median of " + modes_.judged_text();
      }
      if (r.target.kind == Target::Kind::ratio_at_least) r.result = r.ratio >= r.target.value ? "PASS" : "FAIL";
      if (r.target.kind == Target::Kind::ratio_at_most) r.result = r.ratio <= r.target.value ? "PASS" : "FAIL";
      if (r.target.aim > 0) {
        r.note = std::string("aim ") + format_value(r.target.aim, 1) + "x " + (r.ratio >= r.target.aim ? "met" : "not met");
      }
      continue;
    }
    if (r.target.kind == Target::Kind::at_least) r.result = m >= r.target.value ? "PASS" : "FAIL";
    if (r.target.kind == Target::Kind::at_most) r.result = m <= r.target.value ? "PASS" : "FAIL";
  }
}

Json Report::floor_modes_json() const {
  Json j = Json::object();
  j.set("threshold_us", modes_.threshold_us);
  Json rounds = Json::array();
  for (std::size_t i = 0; i < modes_.fast.size(); ++i) {
    Json one = Json::object();
    one.set("round", static_cast<long>(i + 1));
    one.set("ping_p50_us", modes_.ping_p50_us[i]);
    one.set("mode", modes_.fast[i] ? "fast" : "slow");
    rounds.push(std::move(one));
  }
  j.set("rounds", rounds);
  j.set("fast", modes_.fast_rounds);
  j.set("slow", modes_.slow_rounds);
  j.set("judged_against", modes_.judged_text());
  return j;
}

int Report::judged() const {
  return static_cast<int>(std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return !r.result.empty(); }));
}

int Report::failed() const {
  return static_cast<int>(std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return r.result == "FAIL"; }));
}

void Report::print_table(std::FILE* out) const {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"scenario", "library", "median", "min–max", "unit", "target", "ratio", "ratio min–max",
                   "ratio judged against", "result"});
  for (const auto& r : rows_) {
    if (r.runs.empty()) continue;
    std::string ratio, ratio_range;
    if (is_ratio(r.target.kind)) {
      ratio = r.ratio > 0 ? format_value(r.ratio, 2) + "x" : "-";
      if (r.ratio > 0) ratio_range = format_value(r.ratio_min, 2) + "–" + format_value(r.ratio_max, 2);
    }
    std::string result = r.result.empty() ? "" : r.result;
    if (!r.note.empty()) result += result.empty() ? r.note : " (" + r.note + ")";
    cells.push_back({r.scenario, r.library, format_value(r.spread.median, r.decimals),
                     format_value(r.spread.min, r.decimals) + "–" + format_value(r.spread.max, r.decimals), r.unit,
                     r.target.text, ratio, ratio_range, r.judged_against, result});
    if (r.id == modes_row_ && modes_.known()) {
      // The modes row: how many rounds the floor was fast, and each round's mode in order.
      std::string each;
      for (std::size_t i = 0; i < modes_.fast.size(); ++i) {
        if (i > 0) each += ' ';
        each += modes_.fast[i] ? "fast" : "slow";
      }
      cells.push_back({"1 floor: mode per round (fast: PING p50 < " + format_value(modes_.threshold_us, 0) + " us)",
                       r.library, std::to_string(modes_.fast_rounds) + " fast, " + std::to_string(modes_.slow_rounds) + " slow",
                       each, "rounds", "", "", "", modes_.judged_text(), ""});
    }
  }
  // Column widths in characters (the en dash and "≥/≤" are multi-byte: count code points).
  auto width = [](const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
    return n;
  };
  std::vector<std::size_t> w(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], width(row[i]));
  }
  const std::vector<bool> right{false, false, true, true, false, false, true, true, false, false};
  auto line = [&](const std::vector<std::string>& row) {
    std::string s = "|";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::size_t pad = w[i] - width(row[i]);
      s.push_back(' ');
      if (right[i]) s.append(pad, ' ');
      s.append(row[i]);
      if (!right[i]) s.append(pad, ' ');
      s.append(" |");
    }
    std::fprintf(out, "%s\n", s.c_str());
  };
  line(cells[0]);
  std::string sep = "|";
  for (std::size_t i = 0; i < w.size(); ++i) {
    sep.push_back(' ');
    sep.append(right[i] ? w[i] - 1 : w[i], '-');
    sep.append(right[i] ? ": |" : " |");
  }
  std::fprintf(out, "%s\n", sep.c_str());
  for (std::size_t i = 1; i < cells.size(); ++i) line(cells[i]);
}

Json Report::rows_json() const {
  Json arr = Json::array();
  for (const auto& r : rows_) {
    Json j = Json::object();
    j.set("id", r.id);
    j.set("scenario", r.scenario);
    j.set("library", r.library);
    j.set("unit", r.unit);
    j.set("runs", Json::array_of(r.runs));
    j.set("median", r.spread.median);
    j.set("min", r.spread.min);
    j.set("max", r.spread.max);
    if (r.target.kind != Target::Kind::none) {
      Json t = Json::object();
      t.set("text", r.target.text);
      if (!r.target.baseline.empty()) t.set("baseline", r.target.baseline);
      t.set("value", r.target.value);
      if (r.target.aim > 0) t.set("aim", r.target.aim);
      j.set("target", t);
      if (r.ratio > 0) {
        j.set("ratio", r.ratio);
        j.set("ratio_min", r.ratio_min);
        j.set("ratio_max", r.ratio_max);
        j.set("judged_against", r.judged_against);
      }
      // NaN (a round without a baseline value) is written as null.
      if (!r.round_ratios.empty()) j.set("round_ratios", Json::array_of(r.round_ratios));
    }
    j.set("paired", r.paired);
    j.set("result", r.result.empty() ? Json() : Json(r.result));
    if (!r.note.empty()) j.set("note", r.note);
    arr.push(std::move(j));
  }
  return arr;
}

}  // namespace bench
