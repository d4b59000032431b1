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

TEST(Clip, NeverSplitsACharacter) {
  EXPECT_EQ(clip("ééééé", 3), "éé~");
  EXPECT_EQ(clip("abc", 3), "abc");
  EXPECT_EQ(clip("abcd", 3), "ab~");
}

TEST(Base64, EncodesWithPadding) {
  EXPECT_EQ(base64("a\xff"), "Yf8=");
  EXPECT_EQ(base64(""), "");
}

}  // namespace
}  // namespace rlock::output
