// Random number generators of the simulated NPU.
//
// The state of an npu generator is CUDA's: a 64-bit seed and a 64-bit Philox offset
// (counted in 32-bit values, always a multiple of 4), saved as 16 bytes, so code that
// reads or moves offsets (DTensor's parallel RNG, checkpointing, fork_rng) works as on
// a CUDA device.
//
// The numbers come from torch's unchanged cpu kernels, so their distributions are
// exactly cpu's. The kernels draw from a CPU generator whose Mersenne-Twister state is
// refilled before every random call from Philox4x32-10: word 4*j+i of the state is
// output i of Philox(key = seed, counter = (offset / 4, j)), i.e. what curand's Philox
// gives subsequence j at that offset. The stream a call sees is therefore a function of
// (seed, offset) alone, and two offsets never share Philox counters.
//
// After a call the offset advances by the number of 32-bit values the kernel drew,
// rounded up to a multiple of 4 (CUDA rounds its increments the same way). The count is
// recovered from the engine itself right after the call: the Twister's position within
// its block plus the number of blocks it regenerated, found by regenerating blocks from the
// filled state until they match. That needs no knowledge of the operator, so kernels,
// graph replays and fused kernels drawing a seed all advance the offset by what they used.
// A call whose operator bounds its draws (random_draws.h: torch.rand(4) takes 4 values)
// gets only the Philox words those values depend on, the same numbers at a fraction of
// the 156 Philox blocks of a full fill.
//
// A draw holds the generator's lock from the refill to the count (draw_from), so threads
// sharing a generator take turns and each continues where the other left the offset.
//
// During an NPU graph capture the state cannot be read or changed, as on CUDA; recorded
// calls draw at replay time (record_operator.cpp).
//
// The state sits behind a pointer so graph-safe state swapping (graphsafe_get_state /
// graphsafe_set_state) exchanges seed, offset and engine together.
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/generator.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <c10/core/GeneratorImpl.h>

#include <array>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

namespace torch_npu {
namespace {

using Block = std::array<uint32_t, 4>;

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
constexpr Block philox4x32_10(Block ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kBump0 = 0x9E3779B9u, kBump1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    ctr = Block{static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key0, static_cast<uint32_t>(p1),
                static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key1, static_cast<uint32_t>(p0)};
    key0 += kBump0;
    key1 += kBump1;
  }
  return ctr;
}

constexpr bool same_block(const Block& a, const Block& b) {
  return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

// Known-answer vectors of the Random123 distribution.
static_assert(same_block(philox4x32_10(Block{0, 0, 0, 0}, 0, 0),
                         Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
static_assert(same_block(philox4x32_10(Block{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u,
                                       0x299f31d0u),
                         Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));

constexpr int kTwisterWords = 624;  // at::mt19937's state size
constexpr int kTwisterShift = 397;
using TwisterWords = std::array<uint32_t, kTwisterWords>;

// The step at::mt19937 regenerates each word of its block with.
constexpr uint32_t twist(uint32_t u, uint32_t v) {
  const uint32_t y = (u & 0x80000000u) | (v & 0x7fffffffu);
  return (y >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

// One regeneration of a Mersenne-Twister block, as at::mt19937 performs it.
void regenerate(TwisterWords& s) {
  int i = 0;
  for (; i < kTwisterWords - kTwisterShift; ++i) s[i] = s[i + kTwisterShift] ^ twist(s[i], s[i + 1]);
  for (; i < kTwisterWords - 1; ++i) s[i] = s[i + kTwisterShift - kTwisterWords] ^ twist(s[i], s[i + 1]);
  s[i] = s[kTwisterShift - 1] ^ twist(s[i], s[0]);
}

uint64_t round_up_to_4(uint64_t n) { return (n + 3) / 4 * 4; }

void check_offset(uint64_t offset) { TORCH_CHECK(offset % 4 == 0, "offset must be a multiple of 4"); }

// The first `values` words of the Twister block the engine would regenerate from `s`
// (at::mt19937's twist), for values <= kTwisterWords - kTwisterShift: each depends only on
// s[i], s[i + 1] and s[i + kTwisterShift].
void regenerate_prefix(const TwisterWords& s, uint64_t values, TwisterWords& out) {
  for (uint64_t i = 0; i < values; ++i) out[i] = s[i + kTwisterShift] ^ twist(s[i], s[i + 1]);
}

// Calls that draw at most this many values get a partial fill (see refill).
constexpr uint64_t kPartialFillLimit = kTwisterWords - kTwisterShift;

struct NpuGeneratorState : c10::intrusive_ptr_target {
  NpuGeneratorState(uint64_t seed, uint64_t offset)
      : seed(seed), offset(offset), engine(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  // Counts what the kernel drew since the last refill and advances the offset by it.
  void settle() {
    if (!filled) return;
    filled = false;
    at::mt19937_data_pod now;
    {
      std::lock_guard<std::mutex> lock(engine.mutex());
      now = at::check_generator<at::CPUGeneratorImpl>(engine)->engine().data();
    }
    // The engine's seed field carries the refill's stamp; a mismatch would mean the
    // engine was replaced behind the generator's back, and nothing is counted then.
    if (now.seed_ != stamp) return;
    if (partial.has_value()) {
      // Until a draw past the prefix, left_ + next_ stays what the refill set.
      TORCH_INTERNAL_ASSERT(static_cast<uint64_t>(now.left_) + now.next_ == *partial + 1,
                            "an npu random kernel drew more than the ", *partial,
                            " values its operator was expected to draw; its numbers are wrong");
      offset += round_up_to_4(now.next_);
      return;
    }
    if (now.left_ == 1 && now.next_ == 0) return;
    uint64_t blocks = 1;
    TwisterWords state = fill;
    regenerate(state);
    // Most regenerated blocks differ in their first word already; compare whole blocks only then.
    while (state[0] != now.state_[0] || state != now.state_) {
      regenerate(state);
      ++blocks;
    }
    offset += round_up_to_4((blocks - 1) * kTwisterWords + now.next_);
  }

  // Loads the engine with the stream of (seed, offset). A call known to draw at most
  // `max_values` values (<= kPartialFillLimit) gets only those values: the refill computes
  // the Philox blocks they depend on, regenerates their prefix of the Twister block itself
  // and hands the engine that prefix as an already regenerated block with exactly
  // `max_values` draws left in it. The values drawn are the very ones a full fill gives.
  const at::Generator& refill(std::optional<uint64_t> max_values) {
    settle();
    const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
    const uint64_t block_index = offset / 4;
    auto fill_blocks = [&](uint32_t first, uint32_t last) {  // Philox blocks [first, last)
      for (uint32_t j = first; j < last; ++j) {
        const Block out = philox4x32_10(
            Block{static_cast<uint32_t>(block_index), static_cast<uint32_t>(block_index >> 32), j, 0}, key0, key1);
        std::copy(out.begin(), out.end(), fill.begin() + 4 * j);
      }
    };
    pod.seed_ = ++stamp;
    pod.seeded_ = true;
    pod.next_ = 0;
    if (max_values.has_value() && *max_values <= kPartialFillLimit) {
      const uint64_t n = *max_values;
      // Words [0, n] and [kTwisterShift, kTwisterShift + n) of the fill.
      fill_blocks(0, static_cast<uint32_t>(n / 4 + 1));
      fill_blocks(kTwisterShift / 4, static_cast<uint32_t>((kTwisterShift + n + 3) / 4));
      regenerate_prefix(fill, n, pod.state_);
      pod.left_ = static_cast<int>(n + 1);  // the (n + 1)-th draw would regenerate the block
      partial = n;
    } else {
      fill_blocks(0, kTwisterWords / 4);
      pod.state_ = fill;
      pod.left_ = 1;  // the first draw regenerates the block, as after at::mt19937's seeding
      partial.reset();
    }
    twister.set_data(pod);
    {
      std::lock_guard<std::mutex> lock(engine.mutex());
      auto* cpu = at::check_generator<at::CPUGeneratorImpl>(engine);
      cpu->set_engine(twister);
      // A normal sample cached by the previous call belongs to the previous stream.
      cpu->set_next_float_normal_sample(std::nullopt);
      cpu->set_next_double_normal_sample(std::nullopt);
    }
    filled = true;
    return engine;
  }

  std::mutex mutex;  // guards everything below; held from a refill to its settle
  uint64_t seed;
  uint64_t offset;
  at::Generator engine;  // the CPU generator the cpu kernels draw from
  TwisterWords fill{};   // the Philox words of the last refill (all of them unless partial)
  at::mt19937_data_pod pod{};
  at::mt19937 twister;   // staging for the engine's refills (constructing one seeds it, a wasted pass)
  std::optional<uint64_t> partial;  // the values a partial refill provided
  uint64_t stamp = 0;
  bool filled = false;
};

using StateLock = std::lock_guard<std::mutex>;

struct NpuGeneratorImpl final : public c10::GeneratorImpl {
  NpuGeneratorImpl(c10::DeviceIndex device, c10::intrusive_ptr<NpuGeneratorState> state)
      : c10::GeneratorImpl(c10::Device(kNpu, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        state_(std::move(state)) {}
  NpuGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
      : NpuGeneratorImpl(device, c10::make_intrusive<NpuGeneratorState>(seed, 0)) {}

  // As on CUDA, the state of a generator can be neither read nor changed while the current
  // stream is being captured (check_generator_not_capturing); graph-safe swaps can.
  void set_current_seed(uint64_t seed) override {
    check_generator_not_capturing("NpuGeneratorImpl::set_current_seed");
    StateLock lock(state_->mutex);
    state_->seed = seed;
    state_->offset = 0;
  }
  void set_offset(uint64_t offset) override {
    check_generator_not_capturing("NpuGeneratorImpl::set_offset");
    check_offset(offset);
    StateLock lock(state_->mutex);
    state_->offset = offset;
  }
  uint64_t get_offset() const override {
    check_generator_not_capturing("NpuGeneratorImpl::get_offset");
    StateLock lock(state_->mutex);
    return state_->offset;
  }
  uint64_t current_seed() const override {
    check_generator_not_capturing("NpuGeneratorImpl::current_seed");
    StateLock lock(state_->mutex);
    return state_->seed;
  }
  uint64_t seed() override {
    check_generator_not_capturing("NpuGeneratorImpl::seed");
    const uint64_t random = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(random);
    return random;
  }

  // 8 bytes of seed then 8 bytes of offset, as CUDA's generator saves them.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    check_generator_not_capturing("NpuGeneratorImpl::get_state");
    uint64_t seed = 0;
    int64_t offset = 0;
    {
      StateLock lock(state_->mutex);
      seed = state_->seed;
      offset = static_cast<int64_t>(state_->offset);
    }
    auto tensor = at::detail::empty_cpu({kStateBytes}, c10::ScalarType::Byte, std::nullopt, std::nullopt,
                                        std::nullopt, std::nullopt);
    std::memcpy(tensor.data_ptr<uint8_t>(), &seed, sizeof(seed));
    std::memcpy(tensor.data_ptr<uint8_t>() + sizeof(seed), &offset, sizeof(offset));
    return tensor.getIntrusivePtr();
  }
  // Accepts the 16-byte state, or the 8-byte seed alone (offset 0), as CUDA does.
  void set_state(const c10::TensorImpl& new_state) override {
    check_generator_not_capturing("NpuGeneratorImpl::set_state");
    at::detail::check_rng_state(new_state);
    const int64_t size = new_state.numel();
    TORCH_CHECK(size == kStateBytes || size == kSeedBytes, "RNG state is wrong size");
    const auto* bytes = new_state.data_dtype_initialized<uint8_t>();
    uint64_t seed = 0;
    int64_t offset = 0;
    std::memcpy(&seed, bytes, sizeof(seed));
    if (size == kStateBytes) std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
    check_offset(static_cast<uint64_t>(offset));
    StateLock lock(state_->mutex);
    state_->seed = seed;
    state_->offset = static_cast<uint64_t>(offset);
  }

  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& new_state) override {
    auto* other = dynamic_cast<NpuGeneratorImpl*>(new_state.get());
    TORCH_CHECK(other != nullptr, "graphsafe_set_state expects the state of an npu generator");
    state_ = other->state();
  }
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override {
    return c10::make_intrusive<NpuGeneratorImpl>(device().index(), state());
  }

  // The state now behind this generator (a graph-safe swap may replace it at any time).
  c10::intrusive_ptr<NpuGeneratorState> state() const { return state_; }

 private:
  static constexpr int64_t kSeedBytes = sizeof(uint64_t);
  static constexpr int64_t kStateBytes = sizeof(uint64_t) + sizeof(int64_t);

  NpuGeneratorImpl* clone_impl() const override {
    check_generator_not_capturing("NpuGeneratorImpl::clone_impl");
    auto state = this->state();
    StateLock lock(state->mutex);
    return new NpuGeneratorImpl(device().index(), c10::make_intrusive<NpuGeneratorState>(state->seed, state->offset));
  }

  c10::intrusive_ptr<NpuGeneratorState> state_;
};

NpuGeneratorImpl& npu_impl(const at::Generator& gen) {
  auto* impl = dynamic_cast<NpuGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "expected an npu generator, got a generator of ", gen.device());
  return *impl;
}

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::deque<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      generators.emplace_back(at::make_generator<NpuGeneratorImpl>(i, c10::default_rng_seed_val));
    }
  });
  c10::DeviceIndex idx = device < 0 ? current_device() : device;
  check_device_index(idx, "the default generator");
  return generators[idx];
}

bool is_default_generator(const at::Generator& gen) {
  if (gen.device().type() != kNpu || !gen.device().has_index()) return false;
  return default_generator(gen.device().index()).unsafeGetGeneratorImpl() == gen.unsafeGetGeneratorImpl();
}

at::Generator new_generator(c10::DeviceIndex device) {
  c10::DeviceIndex idx = device < 0 ? current_device() : device;
  check_device_index(idx, "torch.Generator");
  return at::make_generator<NpuGeneratorImpl>(idx, c10::default_rng_seed_val);
}

at::Generator engine_of(const at::Generator& npu_gen) { return npu_impl(npu_gen).state()->engine; }

std::pair<uint64_t, uint64_t> reserve_philox_values(const at::Generator& npu_gen, uint64_t increment) {
  auto& impl = npu_impl(npu_gen);
  std::lock_guard<std::mutex> generator_lock(impl.mutex_);
  auto state = impl.state();
  StateLock lock(state->mutex);
  const uint64_t offset = state->offset;
  state->offset = offset + ((increment + 3) / 4) * 4;
  return {state->seed, offset};
}

void draw_from(const at::Generator& npu_gen, std::optional<uint64_t> max_values,
               c10::function_ref<void(const at::Generator&)> draw) {
  auto& impl = npu_impl(npu_gen);
  // The generator's own lock, as CUDA's kernels take it, then its state's, held from the
  // refill to the count: two threads drawing from one generator take turns, each at the
  // offset the other left.
  std::lock_guard<std::mutex> generator_lock(impl.mutex_);
  auto state = impl.state();
  StateLock lock(state->mutex);
  const at::Generator& engine = state->refill(max_values);
  try {
    draw(engine);
  } catch (...) {
    state->settle();
    throw;
  }
  state->settle();
}

}  // namespace torch_npu
