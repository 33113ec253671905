// Placeholder replaced by the tokenizer work.
#include "cli/commands.h"
namespace ssm::cli {
void register_tokenize(CLI::App&, Action&) {}
}  // namespace ssm::cli
