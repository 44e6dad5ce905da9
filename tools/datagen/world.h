// Copyright 2026 The Ember Authors.
//
// World: the planted truth behind ember-datagen's synthetic e-commerce clicks. Users,
// items, categories and shops get hidden parameters drawn once from the seed; each
// example draws a user and an item by Zipf popularity, its context (hour, device,
// session depth) and the user's recently clicked items, and its label from a known
// logistic model:
//
//   logit = b0 + b_user + b_item + b_category + b_shop
//         + w_taste  * <p_user, q_item>                      (latent dim kLatentDim)
//         + w_recent * mean over recent items r of <q_r, q_item>
//         + segment, hour and device effects
//         + price (relative to the category's price level), age and depth terms
//
// where p_user = taste of the user's segment + a personal deviation, and q_item =
// factor of the item's category + an item deviation. Recent items are drawn with the
// same popularity skew, each the best of a few candidates for the user's taste, so
// they reveal the taste (also of users never seen in training). b0 is calibrated so
// the training click rate is about Truth::base_ctr. Each item belongs to one category
// and one shop, drawn once; category and shop sizes (items each) are Zipf-skewed too.
//
// The cross term (opt-in, WorldOptions::cross_weight > 0): a feature cross added to the
// click logit, the product of scalar traits ~ N(0, 1) of two or more of the example's
// fields (WorldOptions::cross_fields), e.g. for user, item and hour
//
//   + w_cross * t_user * t_item * t_hour
//
// Every user, item, category, shop, segment, hour and device has a trait, drawn from a
// stream of their own (so without the term every draw, and every file, is as before). A
// product of three fields is what a DCN-v2 cross network of two layers represents
// exactly and pairwise dot products (DLRM's DOT) do not. b0 is calibrated with it.
//
// Conversions (opt-in, WorldOptions::conversions): a clicked
// example converts (a purchase after the click) with a probability from a second
// logistic model over the same features, with its own hidden parameters:
//
//   cvr_logit = c0 + c_user + c_item + c_category + c_shop + c_segment
//             + w_buy    * <u_user, v_item>     (purchase taste: segment + personal,
//                                                item factor: category + item)
//             + w_click  * <p_user, q_item>     (the click model's taste: some shared
//                                                signal, as in real funnels)
//             + device effect
//             + price (relative to the category and absolute), age and depth terms
//
// (expensive items, young users and shallow sessions convert less; the click model
// has other weights and signs for these). c0 is calibrated so the conversion rate
// among clicked training examples is about ConversionTruth::base_cvr. P(conversion |
// no click) is 0: converted is drawn only for clicks.
//
// IDs: users 1..users (training population) and users+1..users+cold_users (only in
// test data); items 1..items; categories 1..categories; shops 1..shops; segments
// 1000..1019, hours 2000..2023, devices 3000..3003. Popularity ranks map to IDs
// through a seeded shuffle, so popular IDs are not the small ones.
//
// Thread-safety: immutable after construction; Sample* may run on many threads, each
// with its own Rng.

#ifndef EMBER_TOOLS_DATAGEN_WORLD_H_
#define EMBER_TOOLS_DATAGEN_WORLD_H_

#include <array>
#include <cstdint>
#include <vector>

#include "tools/datagen/random.h"

namespace ember::datagen {

inline constexpr int kLatentDim = 8;
inline constexpr int kMaxRecent = 5;
inline constexpr int kNumSegments = 20;
inline constexpr int kNumHours = 24;
inline constexpr int kNumDevices = 4;
inline constexpr uint32_t kSegmentIdBase = 1000;
inline constexpr uint32_t kHourIdBase = 2000;
inline constexpr uint32_t kDeviceIdBase = 3000;

// The magnitudes of the planted truth: standard deviations of the hidden parameters
// and weights of the terms. Tuned with tools/bench/torch_reference.py on the default
// flags (1M training examples, 1 epoch of configs/quickstart.pbtxt): the oracle test
// AUC is about 0.79 and the trained model gets within about 0.015 of it. Most of the
// signal sits where 1M examples can teach it (categories, segments, context, the
// segment x category taste, popular items and users); the personal parts that only
// the oracle can know for rare and cold IDs are kept small.
struct Truth {
  double base_ctr = 0.15;  // target mean click probability of training data
  double user_bias_sd = 0.1;
  double item_bias_sd = 0.15;
  double category_bias_sd = 0.6;
  double shop_bias_sd = 0.1;
  double segment_bias_sd = 0.35;
  double segment_taste_sd = 0.55;   // per latent dim
  double user_taste_sd = 0.1;       // personal deviation from the segment, per dim
  double category_factor_sd = 0.5;  // per latent dim
  double item_factor_sd = 0.1;      // deviation from the category, per dim
  double taste_weight = 1.0;
  double recent_weight = 0.3;
  int recent_candidates = 3;        // each recent item is the best of this many draws
  double category_size_zipf = 0.8;  // items per category: Zipf over categories
  double shop_size_zipf = 0.8;      // items per shop: Zipf over shops
  double price_rel_weight = -0.35;  // per unit of log(price) above the category level
  double price_weight = -0.1;       // per unit of log(price) above log(20)
  double age_weight = -0.2;         // times (age - 40) / 15
  double depth_weight = -0.15;      // times log(1 + session_depth)
};

// The magnitudes of the planted conversion truth. Tuned on the default universe: the
// oracle AUC of the conversion probability among clicked test examples is about 0.77
// (0.77-0.82 over seeds; the oracle AUC of click * conversion over all test examples
// about 0.86), the conversion rate among clicks about 0.1. Shops, categories, price and the
// segment x category purchase taste carry most of the signal (they are learnable from
// the few conversions of a small dataset); personal parts are small.
struct ConversionTruth {
  double base_cvr = 0.1;  // target mean P(conversion | click) of clicked training data
  double user_bias_sd = 0.15;
  double item_bias_sd = 0.25;
  double category_bias_sd = 0.4;
  double shop_bias_sd = 0.5;  // shop quality: the largest single part
  double segment_bias_sd = 0.3;
  double segment_taste_sd = 0.45;   // purchase taste, per latent dim
  double user_taste_sd = 0.1;       // personal deviation from the segment, per dim
  double category_factor_sd = 0.5;  // per latent dim
  double item_factor_sd = 0.1;      // deviation from the category, per dim
  double taste_weight = 1.0;
  double click_taste_weight = 0.3;  // times the click model's <p_user, q_item>
  double price_rel_weight = -0.5;   // per unit of log(price) above the category level
  double price_weight = -0.35;      // per unit of log(price) above log(20)
  double age_weight = 0.3;          // times (age - 40) / 15
  double depth_weight = 0.25;       // times log(1 + session_depth)
};

// The fields a cross term can multiply (WorldOptions::cross_fields).
enum class CrossField { kUser, kItem, kCategory, kShop, kSegment, kHour, kDevice };

struct WorldOptions {
  uint64_t users = 200000;
  uint64_t cold_users = 20000;  // IDs users+1 .. users+cold_users; 0 = none
  uint64_t items = 100000;
  uint64_t categories = 500;
  uint64_t shops = 5000;
  double zipf = 1.1;  // popularity exponent of users and items
  uint64_t seed = 1;
  Truth truth;
  // Plants the conversion truth too (ConversionProbability, SampleConversion). The
  // click truth and every click draw are the same either way: the conversion
  // parameters come from random streams of their own.
  bool conversions = false;
  ConversionTruth conversion;
  // The weight of the planted cross term (see above); 0 = none.
  double cross_weight = 0;
  // The fields whose traits it multiplies (distinct; two or more when cross_weight > 0).
  std::vector<CrossField> cross_fields;
};

// One generated example, as written to the files.
struct Example {
  int label = 0;
  uint64_t user_id = 0;
  uint64_t item_id = 0;
  uint64_t category_id = 0;
  uint64_t shop_id = 0;
  uint32_t user_segment = 0;
  uint32_t hour = 0;
  uint32_t device = 0;
  int num_recent = 0;
  std::array<uint64_t, kMaxRecent> recent{};
  double price = 0;     // rounded to cents
  double user_age = 0;  // rounded to 0.1
  uint32_t session_depth = 0;
  double prob = 0;  // the true click probability
  // With conversions (World::SampleConversion): the true P(conversion | click,
  // features), and the conversion drawn from it (0 whenever label is 0).
  double cvr_prob = 0;
  int converted = 0;
};

class World {
 public:
  // REQUIRES: every count in `options` >= 1 except cold_users; zipf >= 0.
  explicit World(const WorldOptions& options);

  // A user of the training population, by popularity.
  uint64_t SampleTrainUser(Rng& rng) const;
  // A user of the cold population (never in training data). REQUIRES: cold_users >= 1.
  uint64_t SampleColdUser(Rng& rng) const;

  // Draws everything else of an example for `user_id` (a training or cold user): item,
  // context, recent items, probability and label.
  void SampleExample(uint64_t user_id, Rng& rng, Example* example) const;

  // The true P(conversion | click, features) of a sampled example. REQUIRES:
  // options().conversions.
  double ConversionProbability(const Example& example) const;
  // Sets example->cvr_prob and draws example->converted (always 0 without a click)
  // from `rng`, which it advances by exactly one draw per call whatever the label, so
  // the conversions of a stream line up with its examples. REQUIRES:
  // options().conversions.
  void SampleConversion(Rng& rng, Example* example) const;

  uint64_t CategoryOf(uint64_t item_id) const { return items_[item_id - 1].category; }
  uint64_t ShopOf(uint64_t item_id) const { return items_[item_id - 1].shop; }
  double bias() const { return b0_; }
  double conversion_bias() const { return c0_; }  // 0 without conversions
  const WorldOptions& options() const { return options_; }

 private:
  struct User {
    float bias;
    float age;
    uint32_t segment;  // 0..kNumSegments-1
    std::array<float, kLatentDim> taste;
  };
  struct Item {
    float bias;
    float price;
    float log_price_rel;  // log(price) - category's price level
    uint32_t category;
    uint32_t shop;
    std::array<float, kLatentDim> factor;
  };
  struct Category {
    float bias;
    float log_price_level;
    std::array<float, kLatentDim> factor;
  };

  // The hidden parameters of the conversion truth.
  struct ConversionParams {
    std::vector<float> user_bias;  // index id-1, training then cold users
    std::vector<std::array<float, kLatentDim>> user_taste;
    std::vector<float> item_bias;  // index id-1
    std::vector<std::array<float, kLatentDim>> item_factor;
    std::vector<float> category_bias;  // index id-1
    std::vector<float> shop_bias;      // index id-1
    std::array<float, kNumSegments> segment_bias{};
  };

  void BuildEntities();
  // The conversion parameters, then c0.
  void BuildConversions();
  double ConversionLogitWithoutBias(const Example& example) const;
  // Everything of the logit but b0.
  double LogitWithoutBias(const Example& example) const;
  // Fills everything but prob and label.
  void SampleFeatures(uint64_t user_id, Rng& rng, Example* example) const;
  void CalibrateBias();

  WorldOptions options_;
  ZipfTable user_zipf_;
  ZipfTable cold_user_zipf_;
  ZipfTable item_zipf_;
  ZipfTable category_size_zipf_;
  ZipfTable shop_size_zipf_;
  std::vector<uint64_t> user_of_rank_;
  std::vector<uint64_t> cold_user_of_rank_;
  std::vector<uint64_t> item_of_rank_;
  std::vector<uint64_t> category_of_rank_;
  std::vector<uint64_t> shop_of_rank_;
  std::vector<User> users_;           // index id-1, training then cold users
  std::vector<Item> items_;           // index id-1
  std::vector<Category> categories_;  // index id-1
  std::vector<float> shop_bias_;      // index id-1
  std::array<float, kNumSegments> segment_bias_{};
  std::array<std::array<float, kLatentDim>, kNumSegments> segment_taste_{};
  std::array<float, kNumSegments> segment_age_{};
  std::array<double, kNumHours> hour_cdf_{};
  std::array<double, kNumHours> hour_effect_{};
  // The cross term's traits (cross_weight > 0 only), per id-1 (segment, hour and device:
  // per index from their ID base).
  void BuildCrossTraits();
  double CrossTerm(const Example& example) const;
  std::array<float, kNumSegments> segment_cross_{};
  std::array<float, kNumHours> hour_cross_{};
  std::array<float, kNumDevices> device_cross_{};
  std::vector<float> category_cross_, user_cross_, item_cross_, shop_cross_;
  double b0_ = 0;
  ConversionParams conversion_;  // empty without conversions
  double c0_ = 0;
};

}  // namespace ember::datagen

#endif  // EMBER_TOOLS_DATAGEN_WORLD_H_
