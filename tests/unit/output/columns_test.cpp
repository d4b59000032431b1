#include "output/columns.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "output/text.h"

namespace rlock::output {
namespace {

/// Texts a listing may hold: plain, exactly as wide as a column, wider, wide
/// East Asian characters, accents, controls, bidi marks, invalid UTF-8.
const std::vector<std::string> k_texts{
    "",
    "-",
    "deploy",
    "exactly-twenty-chars",
    "a-name-that-is-longer-than-twenty-four-columns",
    "デプロイ本番サーバーのロックです",
    "déploiement prod — ünï 🔒",
    "a\x1b[2Jb\x07\x7f\n",
    "abc\xe2\x80\xae"
    "fdp.exe",
    "a\xff"
    "b\xc3",
};

TEST(Columns, AlignAsFmtDoes) {
  for (const auto& text : k_texts) {
    for (const std::size_t width : {1, 6, 7, 20, 24}) {
      std::string left, right;
      append_left(left, text, width);
      append_right(right, text, width);
      EXPECT_EQ(left, fmt::format("{:<{}}", text, width)) << text;
      EXPECT_EQ(right, fmt::format("{:>{}}", text, width)) << text;
    }
  }
}

TEST(Columns, NumbersAlignAsFmtDoes) {
  for (const std::int64_t value : {0L, 7L, -12L, 1795361542872100L}) {
    std::string out;
    append_right(out, value, 6);
    EXPECT_EQ(out, fmt::format("{:>6}", value));
  }
}

TEST(Columns, ShownTextIsPrintableClippedAndPadded) {
  for (const auto& text : k_texts) {
    for (const std::size_t width : {1, 9, 20, 24}) {
      std::string out;
      append_shown(out, text, width);
      EXPECT_EQ(out, fmt::format("{:<{}}", clip(printable(text), width), width)) << text;
    }
    std::string uncut = "x";
    append_shown(uncut, text);
    EXPECT_EQ(uncut, "x" + printable(text)) << text;
  }
}

TEST(Columns, ShownWidthIsWhatAppendShownFillsUncut) {
  // At its own width a text is written whole, and with no padding.
  for (const auto& text : k_texts) {
    const std::size_t width = shown_width(text);
    std::string out;
    append_shown(out, text, std::max<std::size_t>(width, 1));
    if (width > 0) {
      EXPECT_EQ(out, printable(text)) << text;
    }
  }
  EXPECT_EQ(shown_width("deploy"), 6U);
  // Wide characters take two columns each; an escape takes its characters.
  EXPECT_EQ(shown_width("デプロイ"), 8U);
  EXPECT_EQ(shown_width("a\x1b"), printable("a\x1b").size());
}

}  // namespace
}  // namespace rlock::output
