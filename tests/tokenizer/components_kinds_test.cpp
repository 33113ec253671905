// Pipeline parts of the SentencePiece-style kinds that the goldens do not
// reach, against what HF's components are documented to do: Metaspace with
// split and prepend_scheme "always", the Metaspace decoder dropping "▁" in the
// first token, Strip from the right, BERT's template, and a streamed
// byte-fallback run that turns out broken.
#include <gtest/gtest.h>

#include "ssm/io/json.h"
#include "ssm/tokenizer/decoder.h"
#include "ssm/tokenizer/pre_tokenizer.h"
#include "ssm/tokenizer/streaming_decoder.h"
#include "ssm/tokenizer/tokenizer.h"
#include "ssm/tokenizer/utf8.h"

namespace ssm {
namespace {

const std::string kMark = "\xe2\x96\x81";  // ▁

Json sp_bpe() { return load_json_file(std::string(SSM_GOLDEN_DIR) + "/tokenizer_kinds/sp_bpe/tokenizer.json"); }

TEST(MetaspacePreTokenizer, SplitsBeforeEveryMarkAndPrependsAlways) {
  tok::Metaspace m;
  m.prepend = tok::Metaspace::Prepend::kAlways;
  m.split = true;
  const tok::PreTokenizer pre(m);
  std::string storage;
  std::vector<std::string_view> words;
  pre.split("a  bc", storage, words, /*at_text_start=*/false);
  EXPECT_EQ(words, (std::vector<std::string_view>{kMark + "a", kMark, kMark + "bc"}));
  words.clear();
  pre.split(kMark + "x", storage, words, false);  // already marked: nothing prepended
  EXPECT_EQ(words, (std::vector<std::string_view>{kMark + "x"}));
}

TEST(MetaspacePreTokenizer, FirstSchemePrependsOnlyAtTheStartOfTheText) {
  tok::Metaspace m;
  m.prepend = tok::Metaspace::Prepend::kFirst;
  m.split = false;
  const tok::PreTokenizer pre(m);
  std::string storage;
  std::vector<std::string_view> words;
  pre.split("a b", storage, words, true);
  pre.split("a b", storage, words, false);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(words[1], "a" + kMark + "b");  // the second view is of storage now
}

TEST(Decoders, MetaspaceDropsMarksOfTheFirstTokenOnly) {
  tok::DecoderStep step{tok::DecoderStep::Kind::kMetaspace};
  step.pattern = kMark;
  step.prepend = true;
  const tok::Decoder d({step});
  EXPECT_EQ(d.decode({kMark + "a" + kMark, kMark + "b"}), "a b");
  step.prepend = false;
  EXPECT_EQ(tok::Decoder({step}).decode({kMark + "a", kMark + "b"}), " a b");
  EXPECT_EQ(d.token_bytes(kMark + "the"), " the");
}

TEST(Decoders, StripCutsAtMostCountCharactersEachSide) {
  tok::DecoderStep fuse{tok::DecoderStep::Kind::kFuse};
  tok::DecoderStep strip{tok::DecoderStep::Kind::kStrip};
  strip.content = " ";
  strip.start = 1;
  strip.stop = 2;
  const tok::Decoder d({fuse, strip});
  EXPECT_EQ(d.decode({"  a", "   "}), " a ");
  EXPECT_EQ(d.decode({" "}), "");
}

TEST(Decoders, ByteFallbackRunThatIsNotUtf8IsOneReplacementPerByte) {
  const tok::Decoder d({{tok::DecoderStep::Kind::kByteFallback}});
  EXPECT_EQ(d.decode({"<0xE4>", "<0xB8>", "<0xAD>", "x"}), "\xe4\xb8\xad" "x");
  EXPECT_EQ(d.decode({"<0xE4>", "<0xB8>", "x", "<0xff>"}), "\xef\xbf\xbd\xef\xbf\xbd" "x" "\xef\xbf\xbd");
  EXPECT_EQ(tok::byte_fallback_value("<0x4G>"), -1);
  EXPECT_EQ(tok::byte_fallback_value("<0x+A>"), 10);
}

TEST(PostProcessor, BertTemplateWrapsTheText) {
  Json j = sp_bpe();
  j["post_processor"] = {{"type", "BertProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"</s>", 2}}};
  const auto t = parse_tokenizer_json(j.dump(), "bert.json");
  const std::vector<int32_t> ids = t->encode("hi");
  std::vector<int32_t> expected{1};
  expected.insert(expected.end(), ids.begin(), ids.end());
  expected.push_back(2);
  EXPECT_EQ(t->encode_with_special("hi"), expected);
}

// A run that continues past a finished character is invalid as a whole: the
// stream shows the character when it is finished and the rest at the end,
// never a half character.
TEST(StreamingDecoderKinds, BrokenByteRunNeverPrintsHalfCharacters) {
  const auto t = load_tokenizer_json(std::string(SSM_GOLDEN_DIR) + "/tokenizer_kinds/sp_bpe/tokenizer.json");
  const auto e4 = t->token_to_id("<0xE4>"), b8 = t->token_to_id("<0xB8>"), ad = t->token_to_id("<0xAD>"),
             ff = t->token_to_id("<0xFF>");
  ASSERT_TRUE(e4 && b8 && ad && ff);
  StreamingDecoder s(*t);
  EXPECT_EQ(s.push(*e4), "");
  EXPECT_EQ(s.push(*b8), "");
  EXPECT_GT(s.pending_bytes(), 0u);
  EXPECT_EQ(s.push(*ad), "\xe4\xb8\xad");
  EXPECT_EQ(s.push(*ff), "");
  const std::string rest = s.finish();
  EXPECT_FALSE(rest.empty());
  EXPECT_EQ(tok::valid_utf8_prefix(rest), rest.size());
}

}  // namespace
}  // namespace ssm
