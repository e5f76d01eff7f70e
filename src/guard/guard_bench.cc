// Guard speed: parse and evaluate the guards torch 2.13 produces for a strided conv1d with automatic dynamic shapes
// (10 guards over 6 size symbols), and look up among 100 such entries of one key whose only match is the last.
// bench/guard_speed.py times the same guards evaluated the way torch does. Built with the tests, run by hand:
//
//     build/cpp/aotcache_guard_bench [seconds per measurement, default 1]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "aotcache/guard.h"

namespace {

using aotcache::GuardSet;

// scripts/torch_guard_vectors.py, "conv1d_stride [automatic]", symbols renamed canonically.
const std::vector<std::string> k_conv_guards = {
    "Eq(s5, s1)",
    "s2 >= s4",
    "s4 > 3",
    "(((s2 - s4)//2)) + 1 > 0",
    "(((s2 - s4)//2)) + 1 >= 0",
    "Ne((((s2 - s4)//2)) + 1, 0)",
    "s0*s3*((((s2 - s4)//2)) + 1) >= 2",
    "Ne((((s2 - s4)//2)) + 1, 1)",
    "Eq(Max(1, (((s2 - s4)//2)) + 1), (((s2 - s4)//2)) + 1)",
    "Eq(s3*Max(1, (((s2 - s4)//2)) + 1), s3*((((s2 - s4)//2)) + 1))",
};
const std::vector<int64_t> k_sizes = {4, 5, 20, 6, 6, 5};

volatile int64_t g_sink = 0;  // keeps results alive

// Runs `fn` repeatedly for about `seconds`; returns nanoseconds per call.
template <typename Fn>
double time_ns(double seconds, Fn&& fn) {
  using Clock = std::chrono::steady_clock;
  size_t reps = 1;
  for (;;) {
    const auto start = Clock::now();
    for (size_t i = 0; i < reps; ++i) fn();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed >= seconds) return elapsed * 1e9 / static_cast<double>(reps);
    reps *= 2;
  }
}

template <typename T>
T must(aotcache::Result<T> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;

  const GuardSet set = must(GuardSet::parse(k_conv_guards));
  if (must(set.first_failing(k_sizes)).has_value()) {
    std::fprintf(stderr, "a conv guard fails on the benchmark sizes\n");
    return 1;
  }
  const double parse_ns = time_ns(seconds, [] { g_sink = g_sink + must(GuardSet::parse(k_conv_guards)).size(); });
  const double eval_ns =
      time_ns(seconds, [&] { g_sink = g_sink + static_cast<int64_t>(must(set.first_failing(k_sizes)).value_or(99)); });

  // 100 entries of one key, 10 guards each: the conv guards but the first, then Eq(s0, k); only k == 99 matches.
  std::vector<GuardSet> entries;
  for (int k = 0; k < 100; ++k) {
    std::vector<std::string> texts(k_conv_guards.begin() + 1, k_conv_guards.end());
    texts.push_back("Eq(s0, " + std::to_string(k) + ")");
    entries.push_back(must(GuardSet::parse(texts)));
  }
  std::vector<int64_t> lookup_sizes = k_sizes;
  lookup_sizes[0] = 99;
  if (must(aotcache::first_matching_entry(entries, lookup_sizes)) != std::optional<size_t>(99)) {
    std::fprintf(stderr, "lookup did not find the last entry\n");
    return 1;
  }
  const double lookup_ns = time_ns(seconds, [&] {
    g_sink = g_sink + static_cast<int64_t>(must(aotcache::first_matching_entry(entries, lookup_sizes)).value_or(0));
  });

  std::printf("guards per entry: %zu over %zu symbols\n", set.size(), set.num_symbols());
  std::printf("parse GuardSet (10 guards):                 %8.3f us\n", parse_ns / 1e3);
  std::printf("evaluate one entry (10 guards, all hold):   %8.3f us\n", eval_ns / 1e3);
  std::printf("lookup 100 entries x 10 guards, last hits:  %8.3f us\n", lookup_ns / 1e3);
  return 0;
}
