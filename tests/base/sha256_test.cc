#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

TEST(Sha256Test, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                       "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256Test, OneMillionA) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The same, fed in 1000-byte pieces.
  Sha256 h;
  std::string piece(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(piece);
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, PaddingBoundaries) {
  // Lengths around the 55/56/64-byte padding edges, checked streaming against one-shot and
  // against a known value for 55, 56 and 64 bytes of 'a'.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256Test, StreamingEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 5000; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  for (size_t total : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{127},
                       size_t{128}, size_t{1000}, size_t{5000}}) {
    std::string_view whole(data.data(), total);
    std::string expected = sha256_hex(whole);
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{13}, size_t{63}, size_t{65},
                         size_t{129}}) {
      Sha256 h;
      for (size_t off = 0; off < total; off += chunk) h.update(whole.substr(off, chunk));
      EXPECT_EQ(h.hex_digest(), expected) << "total " << total << " chunk " << chunk;
    }
  }
}

TEST(Sha256Test, DigestBytesMatchHex) {
  std::array<uint8_t, 32> d = Sha256().update("abc").digest();
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
  Sha256 h;
  h.update(std::string_view("abc")).update(std::string_view());
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
}

TEST(Sha256Test, UpdateField) {
  std::string ab_c = Sha256().update_field("ab").update_field("c").hex_digest();
  std::string a_bc = Sha256().update_field("a").update_field("bc").hex_digest();
  EXPECT_NE(ab_c, a_bc);
  // update_field = 8-byte little-endian length, then the bytes.
  std::string framed("\x02\0\0\0\0\0\0\0ab\x01\0\0\0\0\0\0\0c", 19);
  EXPECT_EQ(ab_c, sha256_hex(framed));
  std::string empty_field(8, '\0');
  EXPECT_EQ(Sha256().update_field("").hex_digest(), sha256_hex(empty_field));
}

}  // namespace
}  // namespace kiln
