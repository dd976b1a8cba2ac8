/// The minimum-cost assignment of rows to columns (the Hungarian method, Kuhn–Munkres with
/// potentials, O(n²m)): what SORT and ByteTrack solve to pair tracks with detections.
public enum Assignment {
    /// Pairs (row, column) of a rows × columns cost matrix that minimise the total cost, each
    /// row and each column used at most once, leaving out pairs whose cost is above `maxCost`
    /// (a pair too far apart is no match: its row and column stay unassigned). Costs must be
    /// finite.
    public static func solve(_ cost: [[Double]], maxCost: Double) -> [(row: Int, column: Int)] {
        let rows = cost.count, columns = cost.first?.count ?? 0
        guard rows > 0, columns > 0 else { return [] }
        // Pairs over the threshold cost a constant above any real total, so the solver takes one
        // only when nothing better is left; they are dropped afterwards.
        let forbidden = (cost.joined().filter { $0 <= maxCost }.reduce(0, +) + 1) * 2 + abs(maxCost)
        let transposed = rows > columns
        let n = transposed ? columns : rows, m = transposed ? rows : columns
        func c(_ i: Int, _ j: Int) -> Double {
            let v = transposed ? cost[j][i] : cost[i][j]
            return v <= maxCost ? v : forbidden
        }
        // 1-based, with a virtual column 0 (e-maxx's formulation).
        var u = [Double](repeating: 0, count: n + 1), v = [Double](repeating: 0, count: m + 1)
        var p = [Int](repeating: 0, count: m + 1), way = [Int](repeating: 0, count: m + 1)
        for i in 1...n {
            p[0] = i
            var j0 = 0
            var minv = [Double](repeating: .infinity, count: m + 1)
            var used = [Bool](repeating: false, count: m + 1)
            repeat {
                used[j0] = true
                let i0 = p[j0]
                var delta = Double.infinity, j1 = 0
                for j in 1...m where !used[j] {
                    let cur = c(i0 - 1, j - 1) - u[i0] - v[j]
                    if cur < minv[j] { minv[j] = cur; way[j] = j0 }
                    if minv[j] < delta { delta = minv[j]; j1 = j }
                }
                for j in 0...m {
                    if used[j] { u[p[j]] += delta; v[j] -= delta } else { minv[j] -= delta }
                }
                j0 = j1
            } while p[j0] != 0
            repeat {
                let j1 = way[j0]
                p[j0] = p[j1]
                j0 = j1
            } while j0 != 0
        }
        var pairs: [(row: Int, column: Int)] = []
        for j in 1...m where p[j] != 0 {
            let (i, col) = (p[j] - 1, j - 1)
            let (row, column) = transposed ? (col, i) : (i, col)
            if cost[row][column] <= maxCost { pairs.append((row, column)) }
        }
        return pairs.sorted { $0.row < $1.row }
    }
}
