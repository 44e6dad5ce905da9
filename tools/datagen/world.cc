// Copyright 2026 The Ember Authors.

#include "tools/datagen/world.h"

#include <algorithm>
#include <cmath>

namespace ember::datagen {
namespace {

// Independent random streams (Rng::ForStream) of the world's parameters.
enum Stream : uint64_t {
  kUserStream = 1,
  kItemStream = 2,
  kCategoryStream = 3,
  kShopStream = 4,
  kGlobalStream = 5,
  kCalibrationStream = 6,
  // The conversion truth's (WorldOptions::conversions): streams of their own, so the
  // click truth is the same with and without it. (tools/datagen/generator.cc uses
  // 10-13 for the files.)
  kConversionUserStream = 20,
  kConversionItemStream = 21,
  kConversionCategoryStream = 22,
  kConversionShopStream = 23,
  kConversionGlobalStream = 24,
  kConversionCalibrationStream = 25,
  // The cross term's traits (WorldOptions::cross_weight), likewise.
  kCrossStream = 30,
};

constexpr double kPi = 3.14159265358979323846;
constexpr std::array<double, kNumDevices> kDeviceCdf = {0.55, 0.80, 0.95, 1.0};
constexpr std::array<double, kNumDevices> kDeviceEffect = {0.0, 0.1, -0.25, 0.15};
constexpr std::array<double, kNumDevices> kDeviceConversionEffect = {0.0, 0.35, -0.3, -0.15};
constexpr double kRecentNoneProbability = 0.15;
constexpr double kDepthContinueProbability = 0.75;  // geometric session depth, mean 3
constexpr int kCalibrationExamples = 20000;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

template <typename Array>
double Dot(const Array& a, const Array& b) {
  double sum = 0;
  for (int k = 0; k < kLatentDim; ++k) sum += static_cast<double>(a[k]) * b[k];
  return sum;
}

template <typename Array>
void FillGaussian(Rng& rng, double sd, Array* out) {
  for (auto& v : *out) v = static_cast<float>(sd * rng.Gaussian());
}

}  // namespace

World::World(const WorldOptions& options)
    : options_(options),
      user_zipf_(options.users, options.zipf),
      cold_user_zipf_(std::max<uint64_t>(options.cold_users, 1), options.zipf),
      item_zipf_(options.items, options.zipf),
      category_size_zipf_(options.categories, options.truth.category_size_zipf),
      shop_size_zipf_(options.shops, options.truth.shop_size_zipf) {
  Rng global = Rng::ForStream(options.seed, kGlobalStream, 0);
  user_of_rank_ = ShuffledIds(options.users, global);
  cold_user_of_rank_ = ShuffledIds(options.cold_users, global);
  for (uint64_t& id : cold_user_of_rank_) id += options.users;
  item_of_rank_ = ShuffledIds(options.items, global);
  category_of_rank_ = ShuffledIds(options.categories, global);
  shop_of_rank_ = ShuffledIds(options.shops, global);
  for (int s = 0; s < kNumSegments; ++s) {
    segment_bias_[s] = static_cast<float>(options.truth.segment_bias_sd * global.Gaussian());
    FillGaussian(global, options.truth.segment_taste_sd, &segment_taste_[s]);
    segment_age_[s] = static_cast<float>(22.0 + 30.0 * global.Uniform());
  }
  // Traffic peaks in the evening (20h); clicks peak a little later (22h).
  double total = 0;
  for (int h = 0; h < kNumHours; ++h) {
    total += 1.0 + 0.7 * std::cos(2 * kPi * (h - 20) / kNumHours);
    hour_cdf_[h] = total;
    hour_effect_[h] = 0.2 * std::cos(2 * kPi * (h - 22) / kNumHours);
  }
  for (double& c : hour_cdf_) c /= total;
  hour_cdf_.back() = 1.0;
  if (options.cross_weight > 0) BuildCrossTraits();
  BuildEntities();
  CalibrateBias();
  if (options.conversions) BuildConversions();
}

void World::BuildEntities() {
  const Truth& t = options_.truth;
  categories_.resize(options_.categories);
  for (uint64_t c = 0; c < options_.categories; ++c) {
    Rng rng = Rng::ForStream(options_.seed, kCategoryStream, c + 1);
    Category& category = categories_[c];
    category.bias = static_cast<float>(t.category_bias_sd * rng.Gaussian());
    category.log_price_level = static_cast<float>(std::log(20.0) + 0.8 * rng.Gaussian());
    FillGaussian(rng, t.category_factor_sd, &category.factor);
  }
  shop_bias_.resize(options_.shops);
  for (uint64_t s = 0; s < options_.shops; ++s) {
    Rng rng = Rng::ForStream(options_.seed, kShopStream, s + 1);
    shop_bias_[s] = static_cast<float>(t.shop_bias_sd * rng.Gaussian());
  }
  items_.resize(options_.items);
  for (uint64_t i = 0; i < options_.items; ++i) {
    Rng rng = Rng::ForStream(options_.seed, kItemStream, i + 1);
    Item& item = items_[i];
    item.category = static_cast<uint32_t>(category_of_rank_[category_size_zipf_.Sample(rng)]);
    item.shop = static_cast<uint32_t>(shop_of_rank_[shop_size_zipf_.Sample(rng)]);
    const Category& category = categories_[item.category - 1];
    item.bias = static_cast<float>(t.item_bias_sd * rng.Gaussian());
    FillGaussian(rng, t.item_factor_sd, &item.factor);
    for (int k = 0; k < kLatentDim; ++k) item.factor[k] += category.factor[k];
    const double log_price = category.log_price_level + 0.6 * rng.Gaussian();
    item.price = static_cast<float>(std::max(0.01, std::round(std::exp(log_price) * 100) / 100));
    item.log_price_rel =
        static_cast<float>(std::log(static_cast<double>(item.price)) - category.log_price_level);
  }
  users_.resize(options_.users + options_.cold_users);
  for (uint64_t u = 0; u < users_.size(); ++u) {
    Rng rng = Rng::ForStream(options_.seed, kUserStream, u + 1);
    User& user = users_[u];
    user.segment = static_cast<uint32_t>(rng.Below(kNumSegments));
    user.bias = static_cast<float>(t.user_bias_sd * rng.Gaussian());
    const double age = segment_age_[user.segment] + 9.0 * rng.Gaussian();
    user.age = static_cast<float>(std::round(std::clamp(age, 18.0, 70.0) * 10) / 10);
    FillGaussian(rng, t.user_taste_sd, &user.taste);
    for (int k = 0; k < kLatentDim; ++k) user.taste[k] += segment_taste_[user.segment][k];
  }
}

uint64_t World::SampleTrainUser(Rng& rng) const { return user_of_rank_[user_zipf_.Sample(rng)]; }

uint64_t World::SampleColdUser(Rng& rng) const {
  return cold_user_of_rank_[cold_user_zipf_.Sample(rng)];
}

void World::SampleFeatures(uint64_t user_id, Rng& rng, Example* example) const {
  const User& user = users_[user_id - 1];
  example->user_id = user_id;
  example->item_id = item_of_rank_[item_zipf_.Sample(rng)];
  const Item& item = items_[example->item_id - 1];
  example->category_id = item.category;
  example->shop_id = item.shop;
  example->user_segment = kSegmentIdBase + user.segment;
  const double hour_u = rng.Uniform();
  example->hour = kHourIdBase + static_cast<uint32_t>(
                                    std::upper_bound(hour_cdf_.begin(), hour_cdf_.end(), hour_u) -
                                    hour_cdf_.begin());
  const double device_u = rng.Uniform();
  example->device =
      kDeviceIdBase +
      static_cast<uint32_t>(std::upper_bound(kDeviceCdf.begin(), kDeviceCdf.end(), device_u) -
                            kDeviceCdf.begin());
  example->num_recent =
      rng.Bernoulli(kRecentNoneProbability) ? 0 : 1 + static_cast<int>(rng.Below(kMaxRecent));
  for (int r = 0; r < example->num_recent; ++r) {
    // The best of a few popularity draws for the user's taste.
    uint64_t best = 0;
    double best_score = 0;
    for (int c = 0; c < options_.truth.recent_candidates; ++c) {
      const uint64_t candidate = item_of_rank_[item_zipf_.Sample(rng)];
      const double score = Dot(user.taste, items_[candidate - 1].factor);
      if (c == 0 || score > best_score) {
        best = candidate;
        best_score = score;
      }
    }
    example->recent[r] = best;
  }
  example->price = item.price;
  example->user_age = user.age;
  example->session_depth = static_cast<uint32_t>(
      std::floor(std::log(rng.UniformPositive()) / std::log(kDepthContinueProbability)));
}

double World::LogitWithoutBias(const Example& example) const {
  const Truth& t = options_.truth;
  const User& user = users_[example.user_id - 1];
  const Item& item = items_[example.item_id - 1];
  const Category& category = categories_[item.category - 1];
  double logit = user.bias + item.bias + category.bias + shop_bias_[item.shop - 1] +
                 segment_bias_[user.segment] + hour_effect_[example.hour - kHourIdBase] +
                 kDeviceEffect[example.device - kDeviceIdBase];
  logit += t.taste_weight * Dot(user.taste, item.factor);
  if (example.num_recent > 0) {
    double affinity = 0;
    for (int r = 0; r < example.num_recent; ++r) {
      affinity += Dot(items_[example.recent[r] - 1].factor, item.factor);
    }
    logit += t.recent_weight * affinity / example.num_recent;
  }
  logit += t.price_rel_weight * item.log_price_rel +
           t.price_weight * (std::log(example.price) - std::log(20.0));
  logit += t.age_weight * (example.user_age - 40.0) / 15.0;
  logit += t.depth_weight * std::log1p(static_cast<double>(example.session_depth));
  if (options_.cross_weight > 0) logit += options_.cross_weight * CrossTerm(example);
  return logit;
}

void World::BuildCrossTraits() {
  // One stream, in a fixed order, whichever fields the term uses.
  Rng rng = Rng::ForStream(options_.seed, kCrossStream, 0);
  FillGaussian(rng, 1.0, &segment_cross_);
  FillGaussian(rng, 1.0, &hour_cross_);
  category_cross_.resize(options_.categories);
  FillGaussian(rng, 1.0, &category_cross_);
  user_cross_.resize(options_.users + options_.cold_users);
  FillGaussian(rng, 1.0, &user_cross_);
  item_cross_.resize(options_.items);
  FillGaussian(rng, 1.0, &item_cross_);
  shop_cross_.resize(options_.shops);
  FillGaussian(rng, 1.0, &shop_cross_);
  FillGaussian(rng, 1.0, &device_cross_);
}

double World::CrossTerm(const Example& example) const {
  double product = 1;
  for (CrossField field : options_.cross_fields) {
    switch (field) {
      case CrossField::kUser:
        product *= user_cross_[example.user_id - 1];
        break;
      case CrossField::kItem:
        product *= item_cross_[example.item_id - 1];
        break;
      case CrossField::kCategory:
        product *= category_cross_[example.category_id - 1];
        break;
      case CrossField::kShop:
        product *= shop_cross_[example.shop_id - 1];
        break;
      case CrossField::kSegment:
        product *= segment_cross_[example.user_segment - kSegmentIdBase];
        break;
      case CrossField::kHour:
        product *= hour_cross_[example.hour - kHourIdBase];
        break;
      case CrossField::kDevice:
        product *= device_cross_[example.device - kDeviceIdBase];
        break;
    }
  }
  return product;
}

void World::SampleExample(uint64_t user_id, Rng& rng, Example* example) const {
  SampleFeatures(user_id, rng, example);
  example->prob = Sigmoid(b0_ + LogitWithoutBias(*example));
  example->label = rng.Bernoulli(example->prob) ? 1 : 0;
}

void World::CalibrateBias() {
  Rng rng = Rng::ForStream(options_.seed, kCalibrationStream, 0);
  std::vector<double> logits(kCalibrationExamples);
  Example example;
  for (double& logit : logits) {
    SampleFeatures(SampleTrainUser(rng), rng, &example);
    logit = LogitWithoutBias(example);
  }
  // The mean click probability grows with b0: bisect for base_ctr.
  double lo = -20, hi = 20;
  for (int iteration = 0; iteration < 60; ++iteration) {
    const double mid = (lo + hi) / 2;
    double sum = 0;
    for (double logit : logits) sum += Sigmoid(mid + logit);
    (sum / logits.size() < options_.truth.base_ctr ? lo : hi) = mid;
  }
  b0_ = (lo + hi) / 2;
}

// --- conversions --------------------------------------------------------------------

void World::BuildConversions() {
  const ConversionTruth& t = options_.conversion;
  ConversionParams& c = conversion_;
  // Purchase tastes live in their own latent space: per segment, per category.
  std::array<std::array<float, kLatentDim>, kNumSegments> segment_taste{};
  Rng global = Rng::ForStream(options_.seed, kConversionGlobalStream, 0);
  for (int s = 0; s < kNumSegments; ++s) {
    c.segment_bias[s] = static_cast<float>(t.segment_bias_sd * global.Gaussian());
    FillGaussian(global, t.segment_taste_sd, &segment_taste[s]);
  }
  std::vector<std::array<float, kLatentDim>> category_factor(options_.categories);
  c.category_bias.resize(options_.categories);
  for (uint64_t k = 0; k < options_.categories; ++k) {
    Rng rng = Rng::ForStream(options_.seed, kConversionCategoryStream, k + 1);
    c.category_bias[k] = static_cast<float>(t.category_bias_sd * rng.Gaussian());
    FillGaussian(rng, t.category_factor_sd, &category_factor[k]);
  }
  c.shop_bias.resize(options_.shops);
  for (uint64_t s = 0; s < options_.shops; ++s) {
    Rng rng = Rng::ForStream(options_.seed, kConversionShopStream, s + 1);
    c.shop_bias[s] = static_cast<float>(t.shop_bias_sd * rng.Gaussian());
  }
  c.item_bias.resize(options_.items);
  c.item_factor.resize(options_.items);
  for (uint64_t i = 0; i < options_.items; ++i) {
    Rng rng = Rng::ForStream(options_.seed, kConversionItemStream, i + 1);
    c.item_bias[i] = static_cast<float>(t.item_bias_sd * rng.Gaussian());
    FillGaussian(rng, t.item_factor_sd, &c.item_factor[i]);
    const auto& factor = category_factor[items_[i].category - 1];
    for (int k = 0; k < kLatentDim; ++k) c.item_factor[i][k] += factor[k];
  }
  c.user_bias.resize(users_.size());
  c.user_taste.resize(users_.size());
  for (uint64_t u = 0; u < users_.size(); ++u) {
    Rng rng = Rng::ForStream(options_.seed, kConversionUserStream, u + 1);
    c.user_bias[u] = static_cast<float>(t.user_bias_sd * rng.Gaussian());
    FillGaussian(rng, t.user_taste_sd, &c.user_taste[u]);
    const auto& taste = segment_taste[users_[u].segment];
    for (int k = 0; k < kLatentDim; ++k) c.user_taste[u][k] += taste[k];
  }

  // c0: the mean conversion probability over clicks, sum(ctr * cvr) / sum(ctr), grows
  // with c0: bisect for base_cvr.
  Rng rng = Rng::ForStream(options_.seed, kConversionCalibrationStream, 0);
  std::vector<double> click_probs(kCalibrationExamples);
  std::vector<double> logits(kCalibrationExamples);
  Example example;
  double clicks = 0;
  for (int e = 0; e < kCalibrationExamples; ++e) {
    SampleFeatures(SampleTrainUser(rng), rng, &example);
    click_probs[e] = Sigmoid(b0_ + LogitWithoutBias(example));
    logits[e] = ConversionLogitWithoutBias(example);
    clicks += click_probs[e];
  }
  double lo = -20, hi = 20;
  for (int iteration = 0; iteration < 60; ++iteration) {
    const double mid = (lo + hi) / 2;
    double conversions = 0;
    for (int e = 0; e < kCalibrationExamples; ++e) {
      conversions += click_probs[e] * Sigmoid(mid + logits[e]);
    }
    (conversions / clicks < t.base_cvr ? lo : hi) = mid;
  }
  c0_ = (lo + hi) / 2;
}

double World::ConversionLogitWithoutBias(const Example& example) const {
  const ConversionTruth& t = options_.conversion;
  const ConversionParams& c = conversion_;
  const uint64_t u = example.user_id - 1;
  const uint64_t i = example.item_id - 1;
  const Item& item = items_[i];
  double logit = c.user_bias[u] + c.item_bias[i] + c.category_bias[item.category - 1] +
                 c.shop_bias[item.shop - 1] + c.segment_bias[users_[u].segment] +
                 kDeviceConversionEffect[example.device - kDeviceIdBase];
  logit += t.taste_weight * Dot(c.user_taste[u], c.item_factor[i]);
  logit += t.click_taste_weight * Dot(users_[u].taste, item.factor);
  logit += t.price_rel_weight * item.log_price_rel +
           t.price_weight * (std::log(example.price) - std::log(20.0));
  logit += t.age_weight * (example.user_age - 40.0) / 15.0;
  logit += t.depth_weight * std::log1p(static_cast<double>(example.session_depth));
  return logit;
}

double World::ConversionProbability(const Example& example) const {
  return Sigmoid(c0_ + ConversionLogitWithoutBias(example));
}

void World::SampleConversion(Rng& rng, Example* example) const {
  example->cvr_prob = ConversionProbability(*example);
  const bool converts = rng.Bernoulli(example->cvr_prob);  // drawn for every example
  example->converted = example->label == 1 && converts ? 1 : 0;
}

}  // namespace ember::datagen
