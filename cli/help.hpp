// help.hpp — the CLI's --help texts.
#pragma once

#include <string>
#include <string_view>

namespace dlock::cli {

std::string main_help();
// The help of one command ("run", "status"...); main_help() for an unknown name.
std::string command_help(std::string_view command);

}  // namespace dlock::cli
