// The decode-group rule of --decode-groups auto: the pipeline design's round-time model evaluated at
// every group count, keeping the fewest groups that are near the best.
#include "planning/decode_group_choice.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace glacier::planning {
namespace {

void check(const DecodeGroupInputs& in) {
  if (in.n_stages < 1 || in.slots < 1 || in.max_groups < 1)
    throw std::invalid_argument("decode groups: expected at least one stage, slot and group");
  if (!(in.hop_seconds >= 0.0) || !std::isfinite(in.hop_seconds))
    throw std::invalid_argument("decode groups: expected a finite hop time >= 0, found " + std::to_string(in.hop_seconds));
  if (in.stages.size() != static_cast<size_t>(in.n_stages))
    throw std::invalid_argument("decode groups: expected step costs for each of the " + std::to_string(in.n_stages) +
                                " stages, found " + std::to_string(in.stages.size()));
  for (const StageStepCosts& c : in.stages) {
    if (c.rows.empty() || c.rows.size() != c.seconds.size())
      throw std::invalid_argument("decode groups: expected one time for each measured row count, and at least one");
    for (size_t i = 0; i < c.rows.size(); ++i) {
      if (c.rows[i] < 1 || (i > 0 && c.rows[i] <= c.rows[i - 1]))
        throw std::invalid_argument("decode groups: expected ascending row counts >= 1");
      if (!(c.seconds[i] >= 0.0) || !std::isfinite(c.seconds[i]))
        throw std::invalid_argument("decode groups: expected finite step times >= 0");
    }
  }
}

}  // namespace

double StageStepCosts::at(int32_t n) const {
  if (rows.size() == 1 || n <= rows.front()) return seconds.front();
  size_t j = 1;
  while (j + 1 < rows.size() && rows[j] < n) ++j;  // the segment [j - 1, j] holding n, or the last
  const double slope = (seconds[j] - seconds[j - 1]) / static_cast<double>(rows[j] - rows[j - 1]);
  return std::max(0.0, seconds[j - 1] + slope * static_cast<double>(n - rows[j - 1]));
}

StageStepCosts linear_fit(const StageStepCosts& m) {
  if (m.rows.empty() || m.rows.size() != m.seconds.size())
    throw std::invalid_argument("decode groups: expected one time for each measured row count, and at least one");
  const double n = static_cast<double>(m.rows.size());
  double sx = 0.0, sy = 0.0, sxx = 0.0, sxy = 0.0;
  for (size_t i = 0; i < m.rows.size(); ++i) {
    const double x = m.rows[i], y = m.seconds[i];
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double spread = n * sxx - sx * sx;
  double per_row = spread > 0.0 ? (n * sxy - sx * sy) / spread : 0.0;
  double fixed = (sy - per_row * sx) / n;
  if (per_row < 0.0) {  // costs that fall with rows are noise: a flat line at their mean
    per_row = 0.0;
    fixed = sy / n;
  } else if (fixed < 0.0) {  // through the origin instead
    fixed = 0.0;
    per_row = sxx > 0.0 ? sxy / sxx : 0.0;
  }
  StageStepCosts line{m.rows, {}};
  for (int32_t r : m.rows) line.seconds.push_back(fixed + per_row * r);
  return line;
}

double predicted_seconds_per_token(const DecodeGroupInputs& in, int32_t groups) {
  check(in);
  if (groups < 1) throw std::invalid_argument("decode groups: expected at least one group");
  const int32_t rows = (in.slots + groups - 1) / groups;   // the scheduler's cap on a group's rows
  const int32_t formed = (in.slots + rows - 1) / rows;      // groups that this cap actually makes
  double sum = 0.0, slowest = 0.0;
  for (const StageStepCosts& c : in.stages) {
    const double t = c.at(rows);
    sum += t;
    slowest = std::max(slowest, t);
  }
  const double trip = sum + in.n_stages * in.hop_seconds;
  const double round = std::max(trip, formed * slowest);
  return round / in.slots;
}

DecodeGroupChoice choose_decode_groups(const DecodeGroupInputs& in) {
  check(in);
  DecodeGroupChoice choice;
  if (in.n_stages == 1) {
    choice.groups = 1;
    choice.seconds_per_token = choice.default_seconds_per_token = predicted_seconds_per_token(in, 1);
    return choice;
  }
  const int32_t fewest = in.n_stages;
  const int32_t most = std::max(fewest, std::min(in.slots, in.max_groups));
  std::vector<double> predicted;
  for (int32_t g = fewest; g <= most; ++g) predicted.push_back(predicted_seconds_per_token(in, g));
  const double best = *std::min_element(predicted.begin(), predicted.end());
  size_t pick = 0;
  while (predicted[pick] > best * (1.0 + kDecodeGroupsNearBest)) ++pick;
  choice.groups = fewest + static_cast<int32_t>(pick);
  choice.seconds_per_token = predicted[pick];
  choice.default_seconds_per_token = predicted.front();
  return choice;
}

}  // namespace glacier::planning
