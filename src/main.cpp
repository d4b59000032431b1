#include "cli/cli.h"

int main(int argc, char** argv) {
  return rlock::cli::main(argc, argv);
}
