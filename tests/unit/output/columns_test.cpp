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
    "e\u0301e\u0301 \U0001f680 \u2705",  // combining acute, rocket, check mark
    "a\x1b[2Jb\x07\x7f\n",
    "abc\xe2\x80\xae"
    "fdp.exe",
    "a\xff"
    "b\xc3",
};

TEST(Columns, AlignByTheColumnsATerminalShows) {
  for (const auto& text : k_texts) {
    for (const std::size_t width : {1, 6, 7, 20, 24}) {
      std::string left, right;
      append_left(left, text, width);
      append_right(right, text, width);
      const std::size_t used = display_width(text);
      const std::string pad(width > used ? width - used : 0, ' ');
      EXPECT_EQ(left, text + pad) << text;
      EXPECT_EQ(right, pad + text) << text;
    }
  }
}

TEST(Columns, AlignAsFmtDoesWhereItKnowsTheWidth) {
  // fmt counts a combining mark or a format character as one column and
  // most emoji outside two blocks as one: elsewhere it agrees.
  for (const std::string text : {"deploy", "デプロイ", "déploiement 🔒", "a\xff"}) {
    std::string left;
    append_left(left, text, 20);
    EXPECT_EQ(left, fmt::format("{:<20}", text)) << text;
  }
}

TEST(Columns, ACellIsCutAndPaddedToItsColumns) {
  EXPECT_EQ(cell("\u65e5\u672c", 6), "\u65e5\u672c  ");
  EXPECT_EQ(cell("\u65e5\u672c\u8a9e", 5), "\u65e5\u672c~");
  EXPECT_EQ(cell("a\x1b", 6), "a\\x1b ");
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
      const std::string shown = clip(text, width);
      EXPECT_EQ(out, shown + std::string(width - display_width(shown), ' ')) << text;
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
