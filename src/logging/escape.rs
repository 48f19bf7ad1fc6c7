//! What a value the user wrote (a destination's name, an address, a line of
//! a file) may not bring to a terminal as it is: control characters (ESC
//! starts a terminal's escape sequences, a newline forges a log line of its
//! own, issue 12), the bidirectional-text controls that show text in another
//! order than it is (U+202E, "right-to-left override"), the line and paragraph
//! separators some terminals and viewers break lines at, and the Unicode
//! non-characters (U+FFFE, U+FDD0…), which are no text at all and which MQTT
//! brokers refuse in a topic (issue 30).

/// What `c` is, when it is a character a value must not bring to a terminal
/// as it is; `None` for every character that shows as itself.
pub fn hidden(c: char) -> Option<&'static str> {
    let code = u32::from(c);
    if c.is_control() {
        Some("a control character")
    } else if matches!(code, 0x061C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069) {
        Some("a bidirectional-text control")
    } else if matches!(code, 0x2028 | 0x2029) {
        Some("a line or paragraph separator")
    } else if matches!(code, 0xFDD0..=0xFDEF) || code & 0xFFFE == 0xFFFE {
        Some("a Unicode non-character")
    } else {
        None
    }
}

/// `text` safe to print: every character [`hidden`] names written as its
/// escape (`\u{1b}`, `\n`, `\u{202e}`), everything else as it is.
/// Destination names and addresses are stored this way at load, so every log
/// line, summary and dashboard that shows them is safe (issue 12).
pub fn escape_controls(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c).is_some() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_separators_and_non_characters_are_escaped_and_nothing_else() {
        assert_eq!(
            escape_controls("a\u{1b}[31m\nb\u{202e}c\u{2028}d\u{2029}e\u{fffe}\u{fdd0}\u{1fffe}"),
            "a\\u{1b}[31m\\nb\\u{202e}c\\u{2028}d\\u{2029}e\\u{fffe}\\u{fdd0}\\u{1fffe}"
        );
        for c in [
            '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{2066}', '\u{2069}',
        ] {
            assert_eq!(hidden(c), Some("a bidirectional-text control"), "{c:?}");
        }
        assert_eq!(hidden('\u{85}'), Some("a control character"));
        let plain = "Düsseldorf ドライバー 7 / league+1 — ok";
        assert_eq!(escape_controls(plain), plain);
        assert!(plain.chars().all(|c| hidden(c).is_none()));
    }
}
