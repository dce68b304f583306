// For tests: N Gloo ranks as threads of one process, connected over 127.0.0.1 through an
// in-process store. Each thread runs body(rank, its Gloo group); an exception a thread throws
// fails the test, naming the rank.
//
// PyTorch's flight recorder (2.x) is off here: it is one object per process, and
// FlightRecorder::recordWithResetEnabled inserts a group's first entry into its map of groups
// before taking its mutex (torch 2.11's FlightRecorderDetail.hpp). Two groups in one process
// whose first collectives start at once, as these ranks' do, then corrupt that map: under a CPU
// hog 2 of 200 runs of casting_process_group_test died of SIGSEGV in
// std::_Rb_tree_insert_and_rebalance under ProcessGroupGloo::enqueue. A real rank is a
// process with one group, where no second group races it.
#pragma once

#include <cstdlib>

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
  // Before the recorder exists (it is made at the first collective) and before any thread.
  static const bool recorder_off = setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/1) == 0;
  ASSERT_TRUE(recorder_off) << "setenv(TORCH_FR_BUFFER_SIZE) failed";
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
