//! What a destination's name and an MQTT destination's topic may be (issue
//! 30), wherever they are written (the file, `--to`, the page).
//!
//! A name is what the page changes and removes a destination by, what the log
//! and the summaries show, and what an MQTT destination's default topic is made
//! of: no surrounding spaces (the page trims what it sends, and could then
//! never change or remove the destination: 409), and no character that does
//! not show as itself on a terminal or that MQTT refuses in a topic
//! ([`crate::logging::hidden`]: control characters, bidirectional-text
//! controls, line separators, Unicode non-characters).
//!
//! Two MQTT destinations on the same broker host may not publish on the same
//! topic, or one on the other's `<topic>/status`: removing one would say a
//! retained "offline" over the other, still publishing. Default topics count:
//! `a/b` and `a+b` both default to `forza-relay/a-b`.

use crate::logging::hidden;
use crate::output::mqtt::MqttSettings;

/// What is wrong with the name `name`, if anything.
pub(super) fn name_problem(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some("name is empty".to_owned());
    }
    if let Some((c, what)) = name.chars().find_map(|c| hidden(c).map(|what| (c, what))) {
        return Some(format!(
            "{name:?} holds {what} (U+{:04X}): write the name without it",
            u32::from(c)
        ));
    }
    if name.trim() != name {
        return Some(format!(
            "{name:?} begins or ends with a space: write the name without it"
        ));
    }
    None
}

/// The topics of the MQTT destinations checked so far.
#[derive(Default)]
pub(super) struct Topics {
    /// Broker host (lower case), topic, destination name.
    taken: Vec<(String, String, String)>,
}

impl Topics {
    /// Takes `settings`' topic for destination `name`; what is wrong when
    /// another destination on its broker's host has it (or it is the other's
    /// status topic, or the other's topic is its status topic).
    pub(super) fn claim(&mut self, name: &str, settings: &MqttSettings) -> Option<String> {
        let host = settings.broker.host.to_ascii_lowercase();
        let topic = settings.topic.as_str();
        let status = settings.status_topic();
        let clash = self.taken.iter().find_map(|(h, other_topic, other)| {
            if *h != host {
                None
            } else if other_topic == topic {
                Some(format!(
                    "destinations {other:?} and {name:?} would both publish on {topic:?} on \
                     {}: give each its own topic",
                    settings.broker.host
                ))
            } else if *other_topic == status || format!("{other_topic}/status") == topic {
                Some(format!(
                    "destination {name:?} publishes on {topic:?} and destination {other:?} on \
                     {other_topic:?}: one would publish on the other's status topic; give \
                     each its own topic"
                ))
            } else {
                None
            }
        });
        self.taken
            .push((host, settings.topic.clone(), name.to_owned()));
        clash
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::mqtt::Broker;

    #[test]
    fn names_with_what_does_not_show_or_surrounding_spaces_are_named() {
        assert_eq!(name_problem("league 7"), None);
        assert_eq!(name_problem("Düsseldorf/ドライバー"), None);
        assert_eq!(name_problem(" "), Some("name is empty".to_owned()));
        assert_eq!(
            name_problem(" dash").unwrap(),
            "\" dash\" begins or ends with a space: write the name without it"
        );
        assert_eq!(
            name_problem("a\tb").unwrap(),
            "\"a\\tb\" holds a control character (U+0009): write the name without it"
        );
        for (name, what) in [
            ("a\nb", "a control character (U+000A)"),
            ("evil\u{202e}txt", "a bidirectional-text control (U+202E)"),
            ("a\u{2028}b", "a line or paragraph separator (U+2028)"),
            ("x\u{fffe}", "a Unicode non-character (U+FFFE)"),
            ("x\u{fdd0}", "a Unicode non-character (U+FDD0)"),
        ] {
            let p = name_problem(name).unwrap();
            assert!(p.contains(what), "{p}");
            assert!(p.starts_with(&format!("{name:?}")), "{p}");
            assert!(
                p.chars().all(|c| hidden(c).is_none()),
                "shown safely: {p:?}"
            );
        }
    }

    #[test]
    fn one_topic_per_broker_host_and_none_on_another_s_status() {
        let on = |addr: &str, topic: &str| {
            MqttSettings::new(Broker::parse(addr).unwrap(), topic.to_owned())
        };
        let mut topics = Topics::default();
        assert_eq!(
            topics.claim("a/b", &on("mqtt://b", "forza-relay/a-b")),
            None
        );
        let p = topics
            .claim("a+b", &on("mqtts://B:8883", "forza-relay/a-b"))
            .unwrap();
        assert_eq!(
            p,
            "destinations \"a/b\" and \"a+b\" would both publish on \"forza-relay/a-b\" on B: \
             give each its own topic"
        );
        assert_eq!(
            topics.claim("cloud", &on("mqtt://elsewhere", "forza-relay/a-b")),
            None,
            "another broker: its own topics"
        );
        let p = topics
            .claim("st", &on("mqtt://b", "forza-relay/a-b/status"))
            .unwrap();
        assert!(p.contains("status topic"), "{p}");
        let mut topics = Topics::default();
        assert_eq!(topics.claim("x", &on("mqtt://b", "t/status")), None);
        assert!(topics.claim("y", &on("mqtt://b", "t")).is_some());
    }
}
