// commands.hpp — the CLI's commands. Each parses its own arguments (Context::parse), does its
// work, prints (text or --json) and returns the process exit code (exit_codes.hpp).
#pragma once

#include <string>
#include <vector>

#include "context.hpp"

namespace dlock::cli {

using Args = std::vector<std::string>;

int cmd_run(Context& ctx, const Args& args);      // cmd_run.cpp
int cmd_acquire(Context& ctx, const Args& args);  // cmd_lease.cpp
int cmd_extend(Context& ctx, const Args& args);   // cmd_lease.cpp
int cmd_release(Context& ctx, const Args& args);  // cmd_lease.cpp
int cmd_status(Context& ctx, const Args& args);   // cmd_status.cpp
int cmd_list(Context& ctx, const Args& args);     // cmd_list.cpp
int cmd_leaks(Context& ctx, const Args& args);    // cmd_list.cpp
int cmd_unlock(Context& ctx, const Args& args);   // cmd_unlock.cpp
int cmd_doctor(Context& ctx, const Args& args);   // cmd_doctor.cpp

}  // namespace dlock::cli
