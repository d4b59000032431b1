#pragma once

namespace rlock::cli {

/// Parses the command line, runs one command, and maps its outcome to an exit
/// status. The only place that catches exceptions.
int main(int argc, char** argv);

}  // namespace rlock::cli
