// For tests: N Gloo ranks as threads of one process, connected over 127.0.0.1 through an
// in-process store. Each thread runs body(rank, its Gloo group); an exception a thread throws
// fails the test, naming the rank.
#pragma once

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace distlm::dist {

inline void RunGlooThreads(int world,
                           const std::function<void(int, c10::intrusive_ptr<c10d::ProcessGroupGloo>)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto options = c10d::ProcessGroupGloo::Options::create();
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        options->timeout = std::chrono::seconds(30);
        body(r, c10::make_intrusive<c10d::ProcessGroupGloo>(store, r, world, options));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace distlm::dist
