// The earshot::Error a call throws, for tests that check its code and message.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"

namespace earshot::testing {

// A test failure (and an empty kInternal error) when f throws no earshot::Error.
inline Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no earshot::Error thrown";
  return Error(ErrorCode::kInternal, "");
}

}  // namespace earshot::testing
