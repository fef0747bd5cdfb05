// The robot's REST answers and events as the integration guide's §10.4 models (shared/guide,
// Build 31): the guide's type and property names and its snake_case coding keys. Every property
// is optional, so a robot on other software that leaves a field out still decodes; unknown
// fields are ignored. Additions: `AudioState` (§7.3 has the event, §10.4 no model), the start
// and set-mode answers, `StageInfo` and the §6.4 comparison, all with the guide's JSON keys.
import Foundation

/// How the robot's JSON becomes the models and back: the guide's snake_case keys are the Swift
/// names by strategy, so no model writes its keys by hand.
public enum RobotJSON {
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }

    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
