#include "cli/help_format.h"

namespace ssm::cli {
namespace {

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(26); }

  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_type_size() == 0) return "";  // a flag
    std::string out = " " + opt->get_type_name();
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    return out;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string out = opt->get_description();
    if (opt->get_required()) out += " (required)";
    else if (!opt->get_default_str().empty()) out += " (default: " + opt->get_default_str() + ")";
    return out;
  }
};

}  // namespace

std::shared_ptr<CLI::Formatter> make_help_formatter() { return std::make_shared<HelpFormatter>(); }

}  // namespace ssm::cli
