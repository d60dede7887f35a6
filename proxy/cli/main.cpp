#include "cli/commands.hpp"

int main(int argc, char** argv) {
  return tokengate::cli::run(std::vector<std::string>(argv + 1, argv + argc));
}
