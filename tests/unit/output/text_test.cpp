#include "output/text.h"

#include <gtest/gtest.h>

namespace rlock::output {
namespace {

TEST(Printable, EscapesC0AndDel) {
  EXPECT_EQ(printable("a\x1b[2Jb\x07\x7f\n"), "a\\x1b[2Jb\\x07\\x7f\\x0a");
}

TEST(Printable, EscapesC1ControlsAndBidiOverrides) {
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\u{009b}31m");  // CSI as one code point
  EXPECT_EQ(printable("abc\xe2\x80\xae"
                      "fdp.exe"),
            "abc\\u{202e}fdp.exe");
  EXPECT_EQ(printable("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u{2066}x\\u{2069}");
}

TEST(Printable, ShowsInvalidUtf8ByteByByte) {
  EXPECT_EQ(printable("a\xff"
                      "b"),
            "a\\xffb");
  EXPECT_EQ(printable("\xc3"), "\\xc3");                    // truncated
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\x9b"), "\\x9b");                    // a raw C1 byte
}

TEST(Printable, KeepsOrdinaryText) {
  EXPECT_EQ(printable("déploiement prod — ünï 🔒"), "déploiement prod — ünï 🔒");
}

TEST(Utf8, RejectsWhatIsNotUtf8) {
  EXPECT_TRUE(valid_utf8("ünï 🔒"));
  EXPECT_FALSE(valid_utf8("\xff"));
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xe0\x80\x80"));      // overlong
}

TEST(ShownName, PlainNamesAreThemselves) {
  EXPECT_EQ(shown_name("deploy-prod"), "deploy-prod");
  EXPECT_EQ(shown_name("d\xc3\xa9ploiement"), "d\xc3\xa9ploiement");
  EXPECT_EQ(quoted_name("deploy-prod"), "'deploy-prod'");
}

TEST(ShownName, TwoNamesNeverLookAlike) {
  // One with a real escape sequence, one with its escaped spelling typed
  // out: printable() shows both as job\x1b]0;x\x07.
  const std::string real = "job\x1b]0;x\x07", typed = R"(job\x1b]0;x\x07)";
  EXPECT_EQ(printable(real), printable(typed));
  EXPECT_EQ(shown_name(real), R"($'job\x1b]0;x\x07')");
  EXPECT_EQ(shown_name(typed), R"($'job\\x1b]0;x\\x07')");
  EXPECT_NE(shown_name("$'a'"), shown_name("a\x01"));
  EXPECT_EQ(shown_name("$'a'"), R"($'$\'a\'')");
}

TEST(ShownName, ASpaceAtEitherEndIsQuoted) {
  EXPECT_EQ(shown_name("x "), "$'x '");
  EXPECT_EQ(shown_name(" x"), "$' x'");
  EXPECT_EQ(shown_name(" "), "$' '");
  EXPECT_EQ(quoted_name("x "), "$'x '");
  EXPECT_EQ(shown_name("nightly backup"), "nightly backup");
}

TEST(ShownName, QuotesWhatATerminalOrShellWouldMisread) {
  EXPECT_EQ(shown_name("it's"), R"($'it\'s')");
  EXPECT_EQ(shown_name("bin\xff"), R"($'bin\xff')");
  EXPECT_EQ(shown_name("rtl\xe2\x80\xae"), R"($'rtl\u202e')");
  EXPECT_EQ(shown_name("a\nb"), R"($'a\x0ab')");
  EXPECT_EQ(quoted_name("a\nb"), R"($'a\x0ab')");
}

TEST(Clip, NeverSplitsACharacter) {
  EXPECT_EQ(clip("ééééé", 3), "éé~");
  EXPECT_EQ(clip("abc", 3), "abc");
  EXPECT_EQ(clip("abcd", 3), "ab~");
  // Wide characters take two columns, combining marks none.
  EXPECT_EQ(clip("\u65e5\u672c\u8a9e", 6), "\u65e5\u672c\u8a9e");
  EXPECT_EQ(clip("\u65e5\u672c\u8a9e", 5), "\u65e5\u672c~");
  EXPECT_EQ(clip("\u65e5\u672c\u8a9e", 4), "\u65e5~");
  EXPECT_EQ(clip("a\U0001f512b", 3), "a~");
  EXPECT_EQ(clip("a\U0001f512", 3), "a\U0001f512");
  EXPECT_EQ(clip("e\u0301e\u0301e\u0301", 3), "e\u0301e\u0301e\u0301");
  EXPECT_EQ(clip("e\u0301e\u0301e\u0301e", 3), "e\u0301e\u0301~");
}

TEST(Clip, ShowsTheTextPrintableAndNeverSplitsAnEscape) {
  // "ab\x1b" is 6 columns: at 5, the escape goes whole, not as "\x1".
  EXPECT_EQ(clip("ab\x1b", 6), R"(ab\x1b)");
  EXPECT_EQ(clip("ab\x1b", 5), "ab~");
  EXPECT_EQ(clip("ab\x1b"
                 "cd",
                 8),
            R"(ab\x1bcd)");
  EXPECT_EQ(clip("ab\x1b"
                 "cd",
                 7),
            R"(ab\x1b~)");
  EXPECT_EQ(clip("\xe2\x80\xaeowner", 9), R"(\u{202e}~)");
  EXPECT_EQ(clip("bin\xff\xfe", 8), R"(bin\xff~)");
}

TEST(DisplayWidth, CountsTheColumnsATerminalShows) {
  EXPECT_EQ(display_width("abc"), 3U);
  EXPECT_EQ(display_width("\u65e5\u672c"), 4U);                // CJK: wide
  EXPECT_EQ(display_width("e\u0301"), 1U);                     // combining acute
  EXPECT_EQ(display_width("\U0001f680"), 2U);                  // rocket: wide
  EXPECT_EQ(display_width("\u2705"), 2U);                      // check mark emoji
  EXPECT_EQ(display_width("\U0001f468\u200d\U0001f469"), 4U);  // ZWJ: none
  EXPECT_EQ(display_width("\u2764\ufe0f"), 1U);                // VS16: none
  EXPECT_EQ(display_width("\xff"), 1U);                        // invalid byte
}

TEST(Base64, EncodesWithPadding) {
  EXPECT_EQ(base64("a\xff"), "Yf8=");
  EXPECT_EQ(base64(""), "");
}

}  // namespace
}  // namespace rlock::output
